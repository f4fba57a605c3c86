"""What `flashfleet bench` needs of the stack it measures, as one protocol passed to the session.

``flashfleet.cli.shared.stack_cluster.StackCluster`` is its implementation (the stack's nodes, read
through Pulumi at the CLI layer); tests pass their own.
"""

from __future__ import annotations

from typing import Protocol

from flashfleet.bench.fingerprint import Deployment
from flashfleet.bench.runner import Runner


class Cluster(Protocol):
    def endpoint(self, stack: str) -> str:
        """The serving endpoint's base URL (the stack's outputs); raises BenchSetupError."""
        ...

    def teardown(self, stack: str) -> None:
        """Returns once everything the stack created is gone (`pulumi destroy`); raises otherwise."""
        ...

    def runner(self, stack: str) -> Runner:
        """A runner of bench_serving inside the serving image on one of the stack's nodes."""
        ...

    def deployment(self, stack: str) -> Deployment:
        """Facts for the fingerprint and the cost (recipe, image digest, versions, price)."""
        ...
