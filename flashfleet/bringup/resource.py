"""`attach()`: the playbook run as a resource of the Pulumi program.

Call it once the nodes exist (its inventory input depends on their outputs, so Pulumi
orders it after them on `up` and deletes it, running the teardown, before them on `destroy`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.bringup.provider import PlaybookRunProvider, stored_path
from flashfleet.bringup.run_dirs import default_runs_root


class PlaybookRun(Resource, module="flashfleet", name="PlaybookRun"):
    """Outputs (named as in the state): `runDir`, the last run's directory; `changed`, the tasks
    it changed; and the hashes it diffs on. `hfToken` and `apiKey` are inputs only, and secret."""

    runDir: pulumi.Output[str]
    changed: pulumi.Output[int]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(PlaybookRunProvider(), name, props, opts)


def attach(
    name: str,
    inventory: pulumi.Input[dict[str, Any]],
    hf_token: pulumi.Input[str] | None = None,
    playbook: str = "site.yml",
    *,
    teardown_playbook: str = "teardown.yml",
    extravars: dict[str, Any] | None = None,
    api_key: pulumi.Input[str] | None = None,
    project_dir: Path | None = None,
    runs_dir: Path | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> PlaybookRun:
    """Runs `playbook` on the inventory's hosts during `pulumi up`, `teardown_playbook` on destroy."""
    project = Project(project_dir.resolve()) if project_dir else DEFAULT_PROJECT
    props: dict[str, Any] = {
        # One JSON string each: a Struct would drop the null facts and make every int a float.
        "inventory": pulumi.Output.json_dumps(inventory),
        # Secret in the state's inputs; the provider never copies it into its outputs.
        "hfToken": pulumi.Output.secret(hf_token) if hf_token is not None else None,
        "apiKey": pulumi.Output.secret(api_key) if api_key is not None else None,
        "playbook": playbook,
        "teardownPlaybook": teardown_playbook,
        "extravars": json.dumps(extravars or {}),
        # relative to this repository: a destroy from another checkout finds its own playbooks
        "projectDir": stored_path(project.root),
        "runsDir": str((runs_dir or default_runs_root()).resolve()),
        "treeHash": project.tree_hash(),
        "runDir": None,  # outputs, declared so they become attributes
        "changed": None,
    }
    secret = pulumi.ResourceOptions(additional_secret_outputs=["hfToken", "apiKey"])
    return PlaybookRun(name, props, pulumi.ResourceOptions.merge(opts, secret))
