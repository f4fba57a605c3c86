"""Tear a stack down: `pulumi destroy` (which runs teardown.yml through the playbook resource),
or teardown.yml on existing hosts from an inventory. `bench --destroy` calls `teardown_stack`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from flashfleet.bringup import stackops
from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.project import DEFAULT_PROJECT, Project


class TeardownError(RuntimeError):
    pass


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class TeardownRunner(Protocol):
    """How teardown.yml runs: in this process (the CLI) or in a child (the Pulumi provider)."""

    def __call__(
        self,
        playbook: str,
        inventory: dict[str, Any],
        *,
        project: Project,
        runs_root: Path | None,
        extravars: dict[str, Any] | None,
        timeout_s: int,
    ) -> RunResult: ...


def teardown_hosts(
    inventory: Mapping[str, Any],
    *,
    project: Project = DEFAULT_PROJECT,
    playbook: str = "teardown.yml",
    runs_root: Path | None = None,
    stack: str | None = None,
    emit: Callable[[str], None] | None = _stderr,
    extravars: Mapping[str, Any] | None = None,
    runner: TeardownRunner | None = None,
) -> RunResult:
    """teardown.yml on the inventory's hosts: the one teardown of `flashfleet down` and of the
    provider's delete. Unreachable hosts are reported, not failed; a reachable host the teardown
    did not finish on raises TeardownError (its secrets or services may remain)."""
    from flashfleet.bringup import handoff

    def in_process(playbook: str, inventory: dict[str, Any], **kwargs: Any) -> RunResult:
        return handoff.run_recorded(playbook, inventory, stack=stack, emit=emit, **kwargs)

    result = (runner or in_process)(
        playbook,
        dict(inventory),
        project=project,
        runs_root=runs_root,
        extravars=dict(extravars or {}),
        timeout_s=handoff.TEARDOWN_TIMEOUT_S,
    )
    dark, failed = handoff.teardown_verdict(result, (inventory.get("all") or {}).get("hosts") or {})
    if dark and emit is not None:
        emit(f"warning: teardown: unreachable, left as they are: {', '.join(dark)} ({result.run_dir})")
    if failed:
        raise TeardownError(
            f"teardown did not finish on {', '.join(failed)}; their secrets or servers may remain "
            f"(see {result.run_dir})"
        )
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
