"""What `flashfleet bench` needs from the bring-up, as four small callables.

The bring-up provides them in the module named by ``PROVIDER_MODULE``, as a function
``bench_seams() -> Seams``. Until it exists, `bench` works with an explicit ``--endpoint``, runs
bench_serving from this machine and refuses ``--destroy`` (before any benchmark runs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from flashfleet.bench.fingerprint import Deployment
from flashfleet.bench.runner import Runner
from flashfleet.bench.servers import Server

# Stack name -> the serving endpoint's base URL (from the stack's outputs).
EndpointResolver = Callable[[str], str]
# Stack name -> None once everything the stack created is gone (`pulumi destroy`); raises otherwise.
Teardown = Callable[[str], None]
# Stack name -> a runner that runs bench_serving inside the serving image on one of its nodes.
RunnerFactory = Callable[[str], Runner]
# Stack name -> facts for the fingerprint and the cost (recipe, image digest, versions, price).
DeploymentFacts = Callable[[str], Deployment]
# Stack name -> every HTTP server behind the endpoint (role, URL, DP ranks), reachable from here.
ServerList = Callable[[str], list[Server]]

PROVIDER_MODULE = "flashfleet.bringup.bench_seams"


@dataclass(frozen=True)
class Seams:
    endpoint: EndpointResolver | None = None
    teardown: Teardown | None = None
    runner: RunnerFactory | None = None
    deployment: DeploymentFacts | None = None
    servers: ServerList | None = None  # None: derived from the recipe and the node addresses


def load_seams(module: str = PROVIDER_MODULE) -> Seams:
    """The bring-up's seams, or none at all while it has not been built."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and module.startswith(err.name):
            return Seams()
        raise  # the provider exists but one of its own imports is missing: say so
    seams = mod.bench_seams()
    if not isinstance(seams, Seams):
        raise TypeError(f"{module}.bench_seams() returned {type(seams).__name__}, not Seams")
    return seams
