"""Tear a whole stack down: `pulumi destroy` (whose delete of the playbook resource runs
teardown.yml), or, without the Pulumi CLI, `handoff.teardown` against the stack's latest
`flashfleet configure` run here. `bench --destroy` calls `teardown_stack`.
"""

from __future__ import annotations

import json
from pathlib import Path

from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.bringup.run_dirs import default_runs_root
from flashfleet.cli.shared import stackops
from flashfleet.cli.shared.stack_inventory import latest_run


def _recorded_project(recorded: str | None) -> Project:
    """The project a run recorded, or this program's own when it is gone (another checkout,
    moved or deleted): the teardown must still run, with the playbooks at hand."""
    if recorded and (Path(recorded) / "playbooks").is_dir():
        return Project(Path(recorded))
    return DEFAULT_PROJECT


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


def teardown_stack(stack: str) -> None:
    """Everything the stack runs is gone when this returns; raises otherwise.

    With the Pulumi CLI: `pulumi destroy`. Without it: teardown.yml of the same project,
    against the same inventory, as the stack's latest `flashfleet configure` run on this machine.
    """
    # here, not at the top: `bench` imports this module, and its refusals need no Ansible
    from flashfleet.bringup.handoff import TeardownError, teardown

    if stackops.cli_available():
        stackops.destroy(stack, _stderr)
        return
    run = latest_run(stack, default_runs_root())
    if run is None:
        raise TeardownError(
            f"{stackops.NO_CLI}; and no `flashfleet configure` run of {stack} is recorded here"
        )
    record = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    project = _recorded_project(record.get("project"))
    teardown(json.loads((run / "inventory.json").read_text()), project=project, stack=stack)
