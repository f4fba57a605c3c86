"""Every role a playbook applies, with the vars it passes: the one walk over playbooks, for the
role-argument check before the run (arguments.py) and the extra variables an operator may set
(role_vars.py).

Ansible's own loader (`ansible.playbook.Playbook`) is not used here: it loads every role's
tasks, defaults and handlers and replaces each import_role task by the role's own blocks (the
task, with its vars and `tasks_from`, is not in the result), starts Ansible's configuration and
plugin loaders from the process's ansible.cfg, and its import alone took over a second on the
two-core test machine, for a check that runs before any host is touched. Plays are plain YAML
before they are templated; this reads them as such.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import Project

_ROLE_TASKS = {
    "include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role",
}  # fmt: skip
_IMPORT_PLAYBOOK = {"import_playbook", "ansible.builtin.import_playbook"}
_TASK_SECTIONS = ("pre_tasks", "tasks", "post_tasks")

# libyaml's loader where PyYAML was built with it: the same safe schema, ~10x faster; every
# validate/plan reads ~80 role and playbook files.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class RoleUse:
    playbook: str  # the playbook whose play applies the role (an imported one, where imported)
    play: str
    hosts: str
    role: str
    variables: Mapping[str, Any]
    entry: str = "main"  # the argument-spec entry point (include_role's tasks_from)


def load_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except yaml.YAMLError as err:
        raise BringupInputError(f"{path.name}: not valid YAML: {err}") from None


def _flat(tasks: Any) -> Iterator[Mapping[str, Any]]:
    """The tasks of a task list, those inside block/rescue/always sections included."""
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, Mapping):
            continue
        if "block" in task:
            for section in ("block", "rescue", "always"):
                yield from _flat(task.get(section) or [])
        else:
            yield task


def _play_uses(playbook: str, play: Mapping[str, Any]) -> Iterator[RoleUse]:
    name, hosts = str(play.get("name", "")), str(play.get("hosts", "all"))
    # a play's vars reach every role it applies (the bring-up plays map facts onto the arguments
    # of their one role there, where the converge check reads them too)
    shared = dict(play.get("vars") or {})
    for item in play.get("roles") or []:
        if isinstance(item, str):
            yield RoleUse(playbook, name, hosts, item, shared)
        elif isinstance(item, Mapping):
            role = item.get("role") or item.get("name")
            variables = {**shared, **dict(item.get("vars") or {})}
            yield RoleUse(playbook, name, hosts, str(role), variables)
    for section in _TASK_SECTIONS:
        for task in _flat(play.get(section) or []):
            action = next((k for k in _ROLE_TASKS if k in task), None)
            if action is None:
                continue
            target = task[action]
            role = target.get("name") if isinstance(target, Mapping) else target
            entry = str(target.get("tasks_from", "main")) if isinstance(target, Mapping) else "main"
            variables = {**shared, **dict(task.get("vars") or {})}
            yield RoleUse(playbook, name, hosts, str(role), variables, entry)


def roles_included_by(role: Path) -> set[str]:
    """The roles a role's own tasks include or import by name (the apt_lock role, say): what its
    behaviour depends on beside its own files."""
    out = set()
    for path in sorted((role / "tasks").glob("*.yml")):
        for task in _flat(load_yaml(path) or []):
            action = next((k for k in _ROLE_TASKS if k in task), None)
            target = task[action] if action is not None else None
            name = target.get("name") if isinstance(target, Mapping) else target
            if isinstance(name, str) and "{" not in name:
                out.add(name)
    return out


def role_uses(project: Project, playbook: str, _seen: frozenset[str] = frozenset()) -> Iterator[RoleUse]:
    """Every role a playbook applies (through imported playbooks too), with the vars it passes."""
    if playbook in _seen:
        return
    for play in load_yaml(project.playbook(playbook)) or []:
        if not isinstance(play, Mapping):
            continue
        imported = next((play[k] for k in _IMPORT_PLAYBOOK if k in play), None)
        if imported is not None:
            yield from role_uses(project, str(imported), _seen | {playbook})
        else:
            yield from _play_uses(playbook, play)
