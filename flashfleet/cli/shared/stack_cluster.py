"""The stack's nodes as `flashfleet bench` measures them (a bench.cluster_protocol.Cluster).

endpoint: the stack's `endpoint` output; teardown: `teardown_stack`; runner: bench.yml on node 0
(flashfleet.bench.node_runner); deployment: the stack file plus what bench.yml reads on the
nodes (flashfleet.bench.node_facts). Runner and facts find the nodes through the stack's
outputs or its latest `flashfleet configure` run here (`stack_inventory`). Here, not in bench/:
it reads the stack through Pulumi, which only the CLI knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flashfleet import outputs
from flashfleet.bench.errors import BenchSetupError
from flashfleet.bench.fingerprint import Deployment
from flashfleet.bench.runner import Runner
from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.cli.shared.stack_teardown import teardown_stack
from flashfleet.recipes.layouts import server_root
from flashfleet.stack.files import DEFAULT_STACKS_DIR


def api_key_of(stack: str) -> str | None:
    """The serving API key: $FLASHFLEET_API_KEY, else the stack's `apiKey` secret output (None:
    the stack has none, or Pulumi is not at hand)."""
    import os

    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.secret_env import API_KEY_ENV, check_secret
    from flashfleet.cli.shared import stackops
    from flashfleet.stack.files import API_KEY_KEY

    name, key = API_KEY_ENV, os.environ.get(API_KEY_ENV)
    if not key:
        try:
            out = stackops.outputs(stack).get(outputs.API_KEY)
        except (stackops.PulumiUnavailable, stackops.PulumiError):
            return None
        name, key = API_KEY_KEY, str(out.value) if out is not None else None
    try:
        check_secret(name, key)  # before bench.yml reaches a node
    except BringupInputError as err:
        raise BenchSetupError(str(err)) from None
    return key


@dataclass(frozen=True)
class StackCluster:
    """The stack's nodes, through the bring-up; the folders are parameters for the tests."""

    runs_root: Path | None = None  # None: the hand-off's (FLASHFLEET_RUNS_DIR or ./.runner)
    stacks_dir: Path = DEFAULT_STACKS_DIR
    project: Project = DEFAULT_PROJECT

    def endpoint(self, stack: str) -> str:
        from flashfleet.cli.shared import stackops

        try:
            out = stackops.outputs(stack).get(outputs.ENDPOINT)
        except (stackops.PulumiUnavailable, stackops.PulumiError) as err:
            raise BenchSetupError(f"no --endpoint given and {err}") from None
        if out is None:
            raise BenchSetupError(
                f"stack {stack} has no {outputs.ENDPOINT} output yet (flashfleet up {stack})"
            )
        # The output is the OpenAI base (…/v1); bench_serving wants the server's root and adds the paths.
        return server_root(str(out.value))

    def teardown(self, stack: str) -> None:
        teardown_stack(stack)

    def _runs_root(self) -> Path:
        from flashfleet.bringup.run_dirs import default_runs_root

        return self.runs_root or default_runs_root()

    def inventory(self, stack: str) -> dict[str, Any]:
        """The stack's inventory; a host at a documentation address is refused, never dialled."""
        from flashfleet.cli.shared.stack_inventory import stack_inventory
        from flashfleet.stack.placeholder_addresses import placeholder_network, placeholder_text

        inventory = stack_inventory(stack, self._runs_root())
        for name, facts in ((inventory.get("all") or {}).get("hosts") or {}).items():
            address = str((facts or {}).get("ansible_host", ""))
            if net := placeholder_network(address):
                raise BenchSetupError(
                    f"stack {stack}: host {name}: {placeholder_text(address, net)} (put the host's own "
                    "address in the stack file, then `flashfleet configure` it)"
                )
        return inventory

    def runner(self, stack: str) -> Runner:
        from flashfleet.bench.node_runner import NodeRunner, bench_runs_root
        from flashfleet.bringup.contract import endpoint_host
        from flashfleet.bringup.errors import NoInventory

        try:
            inventory = self.inventory(stack)
            endpoint_host(inventory)
        except NoInventory as err:
            hint = "or run bench_serving here with --local"
            raise BenchSetupError(f"cannot run on the nodes of {stack}: {err} ({hint})") from None
        return NodeRunner(
            stack, inventory, bench_runs_root(self._runs_root()), self.project, api_key_of(stack)
        )

    def deployment(self, stack: str) -> Deployment:
        from flashfleet.bench.node_facts import StackRefused, deployment_facts
        from flashfleet.bench.node_runner import bench_runs_root

        try:
            return deployment_facts(
                stack, inventory_of=self.inventory, runs_root=bench_runs_root(self._runs_root()),
                stacks_dir=self.stacks_dir, project=self.project,
            )  # fmt: skip
        except StackRefused as err:
            raise BenchSetupError(str(err)) from None
