"""What `flashfleet bench` takes from the bring-up (see flashfleet.bench.seams)."""

from __future__ import annotations

from flashfleet import outputs
from flashfleet.bench.seams import Seams
from flashfleet.bringup.teardown import teardown_stack


def endpoint(stack: str) -> str:
    from flashfleet.bench.session import BenchSetupError
    from flashfleet.bringup import stackops

    try:
        out = stackops.outputs(stack).get(outputs.ENDPOINT)
    except (stackops.PulumiUnavailable, stackops.StackError) as err:
        raise BenchSetupError(f"no --endpoint given and {err}") from None
    if out is None:
        raise BenchSetupError(f"stack {stack} has no {outputs.ENDPOINT} output yet (flashfleet up {stack})")
    return str(out.value)


def bench_seams() -> Seams:
    return Seams(endpoint=endpoint, teardown=teardown_stack)
