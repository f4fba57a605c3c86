"""The inventory of a deployed stack, for `configure STACK`, `logs`, `status` and the bench.

From the stack's `inventoryJson` output when the Pulumi CLI is there, else from the stack's
latest `flashfleet configure` run recorded on this machine (what `teardown_stack` uses without
Pulumi). Benchmark runs are recorded apart (``flashfleet.bench.node_runner.bench_runs_root``),
so that neither lookup ever mistakes one for a deployment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flashfleet import outputs
from flashfleet.bringup.errors import NoInventory
from flashfleet.cli.shared import stackops


def inventory_of(outs: Mapping[str, stackops.StackOutput]) -> dict[str, Any] | None:
    """The inventory of a stack's outputs, as deployed (one JSON string: nulls and ints intact);
    None when it has none."""
    if outputs.INVENTORY_JSON not in outs:
        return None
    decoded: dict[str, Any] = json.loads(str(outs[outputs.INVENTORY_JSON].value))
    return decoded


def latest_run(stack: str, runs_root: Path) -> Path | None:
    """The latest run directory of `stack` under `runs_root` that deployed (not a teardown)."""
    runs = sorted(d for d in (runs_root / stack).glob("*") if (d / "inventory.json").is_file())
    runs = [d for d in runs if not d.name.partition("-")[2].startswith("teardown")]
    return runs[-1] if runs else None


def stack_inventory(stack: str, runs_root: Path | None) -> dict[str, Any]:
    """`runs_root` None is the default runs root, as `status` and `configure` record there."""
    from flashfleet.bringup.run_dirs import default_runs_root

    runs_root = runs_root or default_runs_root()
    reasons = []
    if stackops.cli_available():
        try:
            outs = stackops.outputs(stack)
        except (stackops.PulumiError, stackops.PulumiUnavailable) as err:
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
