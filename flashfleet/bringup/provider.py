"""The Pulumi dynamic provider that runs the playbooks inside `pulumi up` / `pulumi destroy`.

The engine pickles the provider with dill and unpickles it in its own process, so the
provider holds no state at all: the class is pickled by reference (this module must stay
importable) and everything a call needs arrives in its inputs, as plain values.

- create/update: run the playbook; a failed run raises (Pulumi keeps the old state and the
  next `up` tries again);
- check: everything the hand-off refuses before a host is touched (`handoff.validate`: the
  inventory contract, the role arguments), one line naming the host and field;
- diff: run again only when the inventory (minus connection details), the playbook, the
  extra variables or the playbooks/roles tree changed; the token alone never triggers a run;
- delete: run the teardown playbook. It converges or fails: a reachable host ends with no
  secret and no server, or the delete raises naming it (Pulumi keeps the resource, and the
  next `destroy` tries again); an unreachable host is a warning, never a blocked destroy; a
  wedged one is given up after TEARDOWN_TIMEOUT_S and named. The project and runs directory
  are stored relative to this repository, so a destroy from another checkout still finds the
  playbooks (this program's own).

The inventory and the extra variables travel as one JSON string each (`attach()` encodes them):
Pulumi's protobuf Struct would drop every null-valued key, at any depth, and turn every int into
a float. The state of an older provider holds them as mappings; `_decoded` reads those as that
provider did, and the diff accepts the hash it stored, so upgrading runs nothing.

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

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ResourceProvider,
    UpdateResult,
)
from pulumi.output import Unknown
from pulumi.runtime.rpc import unwrap_rpc_secret

from flashfleet.bringup.contract import restore_nulls
from flashfleet.bringup.errors import BringupInputError, PlaybookFailed
from flashfleet.bringup.hashes import content_hash, inventory_hash
from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.project import DEFAULT_PROJECT, REPO, Project
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


def _whole_numbers(value: Any) -> Any:
    """Integral floats become ints again, recursively: how state written before the JSON inputs
    (a protobuf Struct carries every number as a double) is read."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _without_nulls(value: Any) -> Any:
    """What a protobuf Struct delivers of a value: no null-valued key at any depth."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _decoded(value: Any) -> dict[str, Any]:
    """An inventory or extra variables as `attach()` sends them (a JSON string), or as the state of
    an older provider holds them (a mapping, nulls dropped, ints as floats)."""
    raw = unwrap_rpc_secret(value)
    if isinstance(raw, str):
        decoded = json.loads(raw)
        if not isinstance(decoded, dict):
            raise BringupInputError(f"expected a JSON object, got {type(decoded).__name__}")
        return decoded
    legacy: dict[str, Any] = _whole_numbers(dict(raw or {}))
    return legacy


def _decoded_inventory(value: Any) -> dict[str, Any]:
    raw = unwrap_rpc_secret(value)
    return _decoded(raw) if isinstance(raw, str) else restore_nulls(_decoded(raw))


def legacy_hashes(inventory: Mapping[str, Any], extravars: Mapping[str, Any]) -> dict[str, str]:
    """The hashes an older provider stored for these inputs: computed on what the Struct had left
    of them (and the top-level null facts `restore_nulls` put back)."""
    return {
        "inventoryHash": inventory_hash(restore_nulls(_without_nulls(inventory))),
        "extravarsHash": content_hash(_without_nulls(extravars)),
    }


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
    from flashfleet.bringup.run_dirs import default_runs_root

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
            inventory=_decoded_inventory(props.get("inventory")),
            playbook=str(props.get("playbook") or "site.yml"),
            teardown_playbook=str(props.get("teardownPlaybook") or "teardown.yml"),
            extravars=_decoded(props.get("extravars")),
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


def _run(inputs: RunInputs) -> RunResult:
    from flashfleet.bringup.isolated import run_isolated  # ansible runs in a child process

    result = run_isolated(
        inputs.playbook,
        inputs.inventory,
        project=inputs.project,
        runs_root=inputs.runs_root,
        extravars=inputs.extravars,
        hf_token=inputs.hf_token,
        api_key=inputs.api_key,
    )
    _say(result.summary())
    if not result.ok:
        raise PlaybookFailed(result.summary())
    return result


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
                # the stack's roleVars: the same rules as `flashfleet validate` and `configure -e`
                playbooks = (
                    str(news.get("playbook") or "site.yml"),
                    str(news.get("teardownPlaybook") or "teardown.yml"),
                )
                check_role_vars(_project(str(news["projectDir"])), playbooks, _decoded(news.get("extravars")))
            except (BringupInputError, FileNotFoundError) as err:
                return CheckResult(news, [CheckFailure("extravars", str(err))])
        # No property named in a failure: the engine would print the whole (multi-KB) input with it.
        try:
            _check(news)
        except (BringupInputError, FileNotFoundError, ValueError) as err:
            return CheckResult(news, [CheckFailure("", str(err))])
        return CheckResult(news, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if _has_unknown(news):
            return DiffResult(changes=True, replaces=[], delete_before_replace=False)
        inputs = RunInputs.from_props(news)
        new = inputs.triggers()
        legacy = legacy_hashes(inputs.inventory, inputs.extravars)
        changed = [key for key in TRIGGERS if olds.get(key) not in {new[key], legacy.get(key, new[key])}]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = RunInputs.from_props(props)
        return CreateResult(f"playbooks-{uuid.uuid4().hex[:12]}", inputs.outputs(_run(inputs)))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = RunInputs.from_props(news)
        return UpdateResult(inputs.outputs(_run(inputs)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # No blanket except: a teardown that did not converge fails the delete, so the state
        # keeps the hosts and a later destroy runs it again (docs/security.md, "Teardown converges").
        _teardown(RunInputs.from_props(props))


def _check(news: Mapping[str, Any]) -> None:
    """The hand-off's own checks (`handoff.validate`) once the inventory is known (new AWS nodes
    in a preview have none yet: their extra variables were checked in `check`)."""
    from flashfleet.bringup import handoff

    if not news.get("projectDir") or _has_unknown(news.get("extravars")):
        return
    if news.get("inventory") is None or _has_unknown(news.get("inventory")):
        return
    project = _project(str(news["projectDir"]))
    playbook = str(news.get("playbook") or "site.yml")
    handoff.validate(
        project, playbook, _decoded_inventory(news.get("inventory")), _decoded(news.get("extravars"))
    )


def _teardown(inputs: RunInputs) -> None:
    from functools import partial

    from flashfleet.bringup.isolated import run_isolated
    from flashfleet.bringup.teardown import TeardownError, teardown_hosts

    try:
        inputs.project.playbook(inputs.teardown_playbook)
    except FileNotFoundError as err:
        # Never a silent skip: the hosts would keep their secrets and servers.
        raise PlaybookFailed(f"teardown cannot run: {err}") from None
    try:
        result = teardown_hosts(
            inputs.inventory,
            project=inputs.project,
            playbook=inputs.teardown_playbook,
            runs_root=inputs.runs_root,
            # the stack's role arguments (site mirrors, the container CLI) hold for the teardown too
            extravars=inputs.extravars,
            emit=_say,  # the engine shows the provider's stderr lines as the destroy's diagnostics
            # the inventory was checked when it was deployed; roles may have moved on
            runner=partial(run_isolated, checked=False),
        )
    except TeardownError as err:
        raise PlaybookFailed(f"{err}. Fix and run the destroy again.") from None
    _say(f"teardown done ({result.run_dir})")
