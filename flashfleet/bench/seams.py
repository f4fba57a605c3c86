"""What `flashfleet bench` needs from the bring-up, as five small callables (the fields of Seams).

``flashfleet.cli.shared.node_seams`` provides them on the stack's nodes (it reads the stack through
Pulumi, a CLI concern); tests pass their own.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Seams:
    endpoint: EndpointResolver | None = None
    teardown: Teardown | None = None
    runner: RunnerFactory | None = None
    deployment: DeploymentFacts | None = None
    servers: ServerList | None = None  # None: derived from the recipe and the node addresses
