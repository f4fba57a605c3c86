"""The bring-up as a resource of the Pulumi program: `attach()` and the provider behind it.

`attach()` registers a `PlaybookRun` once the nodes exist (its inventory input depends on their
outputs, so Pulumi orders it after them on `up` and deletes it, running the teardown, before
them on `destroy`). Its provider runs the playbooks inside `pulumi up` / `pulumi destroy`:

- check: `input_check.validate`, the one validation of this path (the inventory contract, the role
  arguments, a secret where it must not be), plus `configure -e`'s rules for the extra
  variables (the stack's site section); one line naming the
  host and field. The engine checks before every create or update, so those run unchecked;
- diff: run again only when the inventory (minus connection details), the playbook, the extra
  variables or the playbooks/roles tree changed; the token alone never triggers a run;
- create/update: `handoff.run_in_child`; a failed run raises (Pulumi keeps the old state and the
  next `up` tries again);
- delete: `handoff.teardown`. It converges or fails: a reachable host ends with no secret and no
  server, or the delete raises naming it (Pulumi keeps the resource, and the next `destroy` tries
  again); an unreachable host is a warning, never a blocked destroy; a wedged one is given up
  after `handoff.TEARDOWN_TIMEOUT_S` and named.

The engine pickles the provider with dill and unpickles it in its own process, so the provider
holds no state at all: the class is pickled by reference (this module must stay importable) and
everything a call needs arrives in its inputs, as plain values. Every stack's state holds that
pickle, and a delete unpickles the one its create stored: this module keeps its name and the
class its place, or no stack deployed before could be destroyed. The inventory and the extra
variables travel as one JSON string each, in the inputs and in the state: a protobuf Struct would
drop every null-valued key and turn every int into a float. The project and runs directory are
stored relative to this repository, so a destroy from another checkout still finds the playbooks
(this program's own).

The HF token and the API key are inputs only: never in the outputs (the state) nor in any file.
A new API key alone triggers no run (its hash would sit in the state): `flashfleet configure`
writes it to the nodes.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pulumi.output import Unknown
from pulumi.runtime.rpc import unwrap_rpc_secret

from flashfleet.bringup.errors import BringupInputError, PlaybookFailed
from flashfleet.bringup.hashes import content_hash, inventory_hash
from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.project import DEFAULT_PROJECT, REPO, Project
from flashfleet.bringup.run_dirs import default_runs_root
from flashfleet.bringup.secret_env import check_secret
from flashfleet.stack.files import API_KEY_KEY, HF_TOKEN_KEY

# Inputs whose change means "run the playbook again"; compared as hashes kept in the outputs.
TRIGGERS = ("inventoryHash", "treeHash", "playbook", "extravarsHash")


def _has_unknown(value: Any) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, Mapping):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return False


def _decoded(prop: str, value: Any) -> dict[str, Any]:
    """An inventory or extra variables as `attach()` sends them and the state keeps them: one
    JSON string of an object."""
    raw = unwrap_rpc_secret(value)
    if raw is None:
        return {}
    if not isinstance(raw, str):
        # What a provider before the JSON inputs stored; its nulls and ints are lost.
        raise BringupInputError(
            f"{prop}: a {type(raw).__name__}, not a JSON string: the state was written by an older "
            "flashfleet; run `pulumi up` once to rewrite it"
        )
    decoded = json.loads(raw)
    if not isinstance(decoded, dict):
        raise BringupInputError(f"{prop}: expected a JSON object, got {type(decoded).__name__}")
    return decoded


def _warn(message: str) -> None:
    # The engine shows a provider's stderr lines as diagnostics of the `up`/`destroy`.
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def stored_path(path: Path) -> str:
    """A path inside this repository as stored in the state: relative to it, so that the state
    does not tie the stack to the checkout that created it."""
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


def _project(stored: str) -> Project:
    """The project of a stored path: relative ones are this program's; an absolute one written
    by another checkout that no longer exists falls back to this program's, with a warning."""
    path = Path(stored)
    if not path.is_absolute():
        return Project(REPO / path)
    if not (path / "playbooks").is_dir():
        _warn(f"project {stored} is gone; using the playbooks of {REPO}")
        return DEFAULT_PROJECT
    return Project(path)


def _runs_root(stored: str) -> Path:
    path = Path(stored)
    return path if path.parent.is_dir() else default_runs_root()


@dataclass(frozen=True)
class RunInputs:
    inventory: dict[str, Any]
    playbook: str
    teardown_playbook: str
    extravars: dict[str, Any]
    project: Project
    runs_root: Path
    tree_hash: str
    hf_token: str | None
    api_key: str | None = None

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> RunInputs:
        token = unwrap_rpc_secret(props.get("hfToken"))
        key = unwrap_rpc_secret(props.get("apiKey"))
        return cls(
            inventory=_decoded("inventory", props.get("inventory")),
            playbook=str(props.get("playbook") or "site.yml"),
            teardown_playbook=str(props.get("teardownPlaybook") or "teardown.yml"),
            extravars=_decoded("extravars", props.get("extravars")),
            project=_project(str(props["projectDir"])),
            runs_root=_runs_root(str(props["runsDir"])),
            tree_hash=str(props.get("treeHash") or ""),
            hf_token=str(token) if token else None,
            api_key=str(key) if key else None,
        )

    def triggers(self) -> dict[str, str]:
        return {
            "inventoryHash": inventory_hash(self.inventory),
            "treeHash": self.tree_hash,
            "playbook": self.playbook,
            "extravarsHash": content_hash(self.extravars),
        }

    def outputs(self, result: RunResult) -> dict[str, Any]:
        """What the state keeps: enough to diff and to tear down, never the token."""
        return {
            # JSON strings, as the inputs: a delete reads them back with their nulls and ints
            "inventory": json.dumps(self.inventory),
            "playbook": self.playbook,
            "teardownPlaybook": self.teardown_playbook,
            "extravars": json.dumps(self.extravars),
            "projectDir": stored_path(self.project.root),
            "runsDir": str(self.runs_root),
            **self.triggers(),
            "runDir": str(result.run_dir),
            "changed": result.count("changed"),
        }


def _bring_up(inputs: RunInputs) -> RunResult:
    from flashfleet.bringup import handoff

    result = handoff.run_in_child(
        inputs.playbook,
        inputs.inventory,
        project=inputs.project,
        runs_root=inputs.runs_root,
        extravars=inputs.extravars,
        hf_token=inputs.hf_token,
        api_key=inputs.api_key,
        checked=False,  # the engine's check ran `input_check.validate` on these very inputs
    )
    _say(result.summary())
    if not result.ok:
        raise PlaybookFailed(result.summary())
    return result


def _validate(news: Mapping[str, Any]) -> None:
    """`input_check.validate` once the inventory is known (new AWS nodes in a preview have none yet:
    their extra variables were checked in `check`)."""
    from flashfleet.bringup.input_check import validate

    if not news.get("projectDir") or _has_unknown(news.get("extravars")):
        return
    if news.get("inventory") is None or _has_unknown(news.get("inventory")):
        return
    inputs = RunInputs.from_props(news)
    validate(
        inputs.project,
        inputs.playbook,
        inputs.inventory,
        inputs.extravars,
        hf_token=inputs.hf_token,
        api_key=inputs.api_key,
    )


def _tear_down(inputs: RunInputs) -> None:
    from flashfleet.bringup.handoff import TeardownError, teardown

    try:
        result = teardown(
            inputs.inventory,
            project=inputs.project,
            playbook=inputs.teardown_playbook,
            runs_root=inputs.runs_root,
            # the stack's role arguments (site mirrors, the container CLI) hold for the teardown too
            extravars=inputs.extravars,
            emit=_say,  # the engine shows the provider's stderr lines as the destroy's diagnostics
            checked=False,  # validated when it was deployed; the roles may have moved on
            in_child=True,
        )
    except TeardownError as err:
        raise PlaybookFailed(f"{err}. Fix and run the destroy again.") from None
    _say(f"teardown done ({result.run_dir})")


class PlaybookRunProvider(ResourceProvider):
    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        for prop, config_key in (("hfToken", HF_TOKEN_KEY), ("apiKey", API_KEY_KEY)):
            secret = unwrap_rpc_secret(news.get(prop))
            if isinstance(secret, str):
                try:
                    check_secret(config_key, secret)
                except BringupInputError as err:
                    return CheckResult(news, [CheckFailure(prop, str(err))])
        if news.get("projectDir") and not _has_unknown(news.get("extravars")):
            from flashfleet.bringup.role_vars import check_role_vars

            try:
                # the stack's site section, checked by the spec: again here, by `configure -e`'s rules
                playbooks = (
                    str(news.get("playbook") or "site.yml"),
                    str(news.get("teardownPlaybook") or "teardown.yml"),
                )
                extravars = _decoded("extravars", news.get("extravars"))
                check_role_vars(_project(str(news["projectDir"])), playbooks, extravars)
            except (BringupInputError, FileNotFoundError) as err:
                return CheckResult(news, [CheckFailure("extravars", str(err))])
        # No property named in a failure: the engine would print the whole (multi-KB) input with it.
        try:
            _validate(news)
        except (BringupInputError, FileNotFoundError, ValueError) as err:
            return CheckResult(news, [CheckFailure("", str(err))])
        return CheckResult(news, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if _has_unknown(news):
            return DiffResult(changes=True, replaces=[], delete_before_replace=False)
        new = RunInputs.from_props(news).triggers()
        changed = [key for key in TRIGGERS if olds.get(key) != new[key]]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = RunInputs.from_props(props)
        return CreateResult(f"playbooks-{uuid.uuid4().hex[:12]}", inputs.outputs(_bring_up(inputs)))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = RunInputs.from_props(news)
        return UpdateResult(inputs.outputs(_bring_up(inputs)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # No blanket except: a teardown that did not converge fails the delete, so the state
        # keeps the hosts and a later destroy runs it again (docs/security.md, "Teardown converges").
        _tear_down(RunInputs.from_props(props))


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
