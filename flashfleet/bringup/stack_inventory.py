"""The inventory of a deployed stack, for the playbooks `flashfleet bench` runs (bench.yml).

From the stack's outputs when the Pulumi CLI is there (what `configure STACK` uses), else from
the stack's latest `flashfleet configure` run recorded on this machine (what `teardown_stack`
uses without Pulumi). Benchmark runs are recorded apart (``bench_runs_root``), so that neither
lookup ever mistakes one for a deployment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flashfleet import outputs
from flashfleet.bringup import stackops
from flashfleet.bringup.contract import restore_nulls
from flashfleet.bringup.teardown import latest_run

BENCH_RUNS = "_bench"


class NoInventory(Exception):
    """Neither the stack's outputs nor a recorded configure run give its hosts (one line)."""


def bench_runs_root(runs_root: Path) -> Path:
    return runs_root / BENCH_RUNS


def inventory_of(outs: Mapping[str, stackops.StackOutput]) -> dict[str, Any] | None:
    """The inventory of a stack's outputs, nulls and ints as deployed; None when it has none.

    A stack last brought up before the JSON output existed has only the mapping, whose
    null-valued keys Pulumi dropped: its top-level null facts are put back."""
    if outputs.INVENTORY_JSON in outs:
        decoded: dict[str, Any] = json.loads(str(outs[outputs.INVENTORY_JSON].value))
        return decoded
    if outputs.INVENTORY in outs:
        return restore_nulls(outs[outputs.INVENTORY].value)
    return None


def stack_inventory(stack: str, runs_root: Path) -> dict[str, Any]:
    reasons = []
    if stackops.cli_available():
        try:
            outs = stackops.outputs(stack)
        except (stackops.StackError, stackops.PulumiUnavailable) as err:
            reasons.append(str(err))
        else:
            deployed = inventory_of(outs)
            if deployed is not None:
                return deployed
            reasons.append(f"stack {stack} has no {outputs.INVENTORY} output (a Kubernetes stack has none)")
    else:
        reasons.append("no Pulumi CLI to read the stack's outputs")
    run = latest_run(stack, runs_root)
    if run is None:
        reasons.append(f"no `flashfleet configure {stack}` run recorded under {runs_root}")
        raise NoInventory("; ".join(reasons))
    inventory: dict[str, Any] = json.loads((run / "inventory.json").read_text())
    return inventory


def node_zero(inventory: dict[str, Any]) -> str:
    """The host that serves the stack's endpoint (flashfleet_node_index 0)."""
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    for name, hvars in hosts.items():
        if isinstance(hvars, dict) and hvars.get("flashfleet_node_index") == 0:
            return str(name)
    raise NoInventory("the inventory has no node with flashfleet_node_index 0")
