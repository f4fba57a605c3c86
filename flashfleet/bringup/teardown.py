"""Tear a stack down: `pulumi destroy` (which runs teardown.yml through the playbook resource),
or teardown.yml on existing hosts from an inventory. `bench --destroy` calls `teardown_stack`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from flashfleet.bringup import stackops
from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.project import DEFAULT_PROJECT, Project


class TeardownError(RuntimeError):
    pass


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def teardown_hosts(
    inventory: Mapping[str, Any],
    *,
    project: Project = DEFAULT_PROJECT,
    playbook: str = "teardown.yml",
    runs_root: Path | None = None,
    stack: str | None = None,
    emit: Callable[[str], None] | None = _stderr,
    extravars: Mapping[str, Any] | None = None,
) -> RunResult:
    """teardown.yml on existing hosts. Unreachable hosts are reported, not failed; a task that
    fails on a reachable host raises TeardownError (its services may still run)."""
    from flashfleet.bringup import handoff

    result = handoff.run(
        playbook,
        inventory,
        project=project,
        runs_root=runs_root,
        stack=stack,
        emit=emit,
        extravars=extravars,
        timeout_s=handoff.TEARDOWN_TIMEOUT_S,
    )
    dark, failed = handoff.teardown_verdict(result, (inventory.get("all") or {}).get("hosts") or {})
    if dark and emit is not None:
        emit(f"warning: unreachable, left as they are: {', '.join(dark)}")
    if failed:
        raise TeardownError(f"teardown failed on {', '.join(failed)}; see {result.run_dir}")
    return result


def latest_run(stack: str, runs_root: Path) -> Path | None:
    """The latest run directory of `stack` under `runs_root` that deployed (not a teardown)."""
    runs = sorted(d for d in (runs_root / stack).glob("*") if (d / "inventory.json").is_file())
    runs = [d for d in runs if not d.name.partition("-")[2].startswith("teardown")]
    return runs[-1] if runs else None


def _recorded_project(recorded: str | None) -> Project:
    """The project a run recorded, or this program's own when it is gone (another checkout,
    moved or deleted): the teardown must still run, with the playbooks at hand."""
    if recorded and (Path(recorded) / "playbooks").is_dir():
        return Project(Path(recorded))
    return DEFAULT_PROJECT


def teardown_stack(stack: str) -> None:
    """Everything the stack runs is gone when this returns; raises otherwise.

    With the Pulumi CLI: `pulumi destroy`. Without it: teardown.yml of the same project,
    against the same inventory, as the stack's latest `flashfleet configure` run on this machine.
    """
    if stackops.cli_available():
        stackops.destroy(stack, _stderr)
        return
    import json

    from flashfleet.bringup.run_dirs import default_runs_root

    run = latest_run(stack, default_runs_root())
    if run is None:
        raise TeardownError(
            f"{stackops.NO_CLI}; and no `flashfleet configure` run of {stack} is recorded here"
        )
    record = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    project = _recorded_project(record.get("project"))
    teardown_hosts(json.loads((run / "inventory.json").read_text()), project=project, stack=stack)
