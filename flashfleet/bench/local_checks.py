"""What `bench --local` checks before anything else: a load generator here, and a server that
answers at the --endpoint it was given. Either one missing is known in a second; found only by
the levels, it cost a readiness wait of ten minutes and a results folder of empty plots.
"""

from __future__ import annotations

import json

from flashfleet.bench.errors import BenchSetupError
from flashfleet.bench.runner import Invocation, Runner

CLIENT_MARK = "flashfleet-client:"
# One argv, no shell: whether the interpreter can import the bench module (and so everything it
# imports: a tokenizer library missing fails here, not at the first level), and the sglang
# distribution's version when it has one.
CLIENT_PROBE = """
import importlib, importlib.metadata, json, sys
try:
    importlib.import_module(sys.argv[1])
    found, why = True, ""
except BaseException as e:
    found, why = False, f"{type(e).__name__}: {e}"
try:
    version = importlib.metadata.version("sglang")
except Exception:
    version = None
print("flashfleet-client:" + json.dumps([found, why, version]), flush=True)
"""
HOW_TO_GET = (
    "install the load generator into it (pip install sglang==VERSION, the version the servers run), "
    "give --python an interpreter that has it, or leave out --local to run it on a node"
)


def check_client(runner: Runner, python: str, module: str, timeout_s: float = 60.0) -> None:
    """Refuse (BenchSetupError, one line) when ``python`` cannot run ``python -m module``."""
    try:
        argv = (python, "-c", CLIENT_PROBE, module)
        done = runner(Invocation(argv=argv, output_name="none", timeout_s=timeout_s))
    except Exception as err:
        raise BenchSetupError(f"--local: cannot run {python}: {type(err).__name__}: {err}") from None
    if done.runner_error:
        raise BenchSetupError(f"--local: {done.runner_error}; {HOW_TO_GET}")
    for line in done.log.splitlines():
        if line.startswith(CLIENT_MARK):
            found, why, _version = json.loads(line[len(CLIENT_MARK) :])
            if found:
                return
            raise BenchSetupError(f"--local: {python} cannot run {module} ({why}); {HOW_TO_GET}")
    last = (done.log.strip().splitlines() or ["no output"])[-1]
    raise BenchSetupError(
        f"--local: {python} did not answer the client check (exit {done.returncode}: {last})"
    )


def check_endpoint_answers(endpoint: str, timeout_s: float = 3.0) -> None:
    """Refuse when nothing answers at the endpoint at all (refused, unreachable, no answer in
    ``timeout_s``); any HTTP answer, even an error while the model loads, is left to readiness."""
    from flashfleet.bench.servers import http_get

    status, body = http_get(f"{endpoint}/health", timeout_s)
    if status == 0:
        why = body.strip().splitlines()[0] if body.strip() else "no answer"
        raise BenchSetupError(
            f"--endpoint {endpoint}: nothing answers there ({why}); start the server, or give its address"
        )
