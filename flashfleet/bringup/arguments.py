"""Role arguments checked against each role's `meta/argument_specs.yml` before the run.

Playbooks map the inventory's `flashfleet_*` facts onto role arguments
(`preflight_gpu_count: "{{ flashfleet_gpu_count }}"`). Where a value is a literal, a direct
reference to one fact, or an extra variable, it is known before the run: check it per host
with Ansible's own validator, so a bad value is refused before any host is touched. Anything
more templated is left to the check Ansible runs when the role starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import Project

_ONE_FACT = re.compile(r"^\{\{\s*(flashfleet_\w+)\s*\}\}$")
_ROLE_TASKS = {
    "include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role",
}  # fmt: skip
_IMPORT_PLAYBOOK = {"import_playbook", "ansible.builtin.import_playbook"}


@dataclass(frozen=True)
class RoleUse:
    playbook: str
    play: str
    hosts: str
    role: str
    variables: Mapping[str, Any]
    entry: str = "main"  # the argument-spec entry point (include_role's tasks_from)


# libyaml's loader where PyYAML was built with it: the same safe schema, ~10x faster; every
# validate/plan reads ~80 role and playbook files.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path: Path) -> Any:
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


def role_uses(project: Project, playbook: str, _seen: frozenset[str] = frozenset()) -> Iterator[RoleUse]:
    """Every role a playbook applies (through imported playbooks too), with the vars it passes."""
    if playbook in _seen:
        return
    plays = _load_yaml(project.playbook(playbook)) or []
    for play in plays:
        if not isinstance(play, Mapping):
            continue
        imported = next((play[k] for k in _IMPORT_PLAYBOOK if k in play), None)
        if imported is not None:
            yield from role_uses(project, str(imported), _seen | {playbook})
            continue
        name, hosts = str(play.get("name", "")), str(play.get("hosts", "all"))
        for entry in play.get("roles") or []:
            if isinstance(entry, str):
                yield RoleUse(playbook, name, hosts, entry, {})
            elif isinstance(entry, Mapping):
                role = entry.get("role") or entry.get("name")
                yield RoleUse(playbook, name, hosts, str(role), dict(entry.get("vars") or {}))
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in _flat(play.get(section) or []):
                action = next((k for k in _ROLE_TASKS if k in task), None)
                if action is None:
                    continue
                target = task[action]
                role = target.get("name") if isinstance(target, Mapping) else target
                entry = str(target.get("tasks_from", "main")) if isinstance(target, Mapping) else "main"
                yield RoleUse(playbook, name, hosts, str(role), dict(task.get("vars") or {}), entry)


def _role_spec(project: Project, role: str, entry: str = "main") -> tuple[dict[str, Any], set[str]] | None:
    """(options of the entry point, names with a default), or None without a spec."""
    if "{{" in role:
        return None
    if not (project.roles / role).is_dir():
        raise BringupInputError(f"role {role}: not in {project.roles}")
    spec_file = project.roles / role / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        return None
    specs = (_load_yaml(spec_file) or {}).get("argument_specs", {})
    if entry != "main" and entry not in specs:
        raise BringupInputError(f"role {role}: no entry point {entry!r} in its meta/argument_specs.yml")
    options = dict((specs.get(entry) or {}).get("options") or {})
    defaults_file = project.roles / role / "defaults" / "main.yml"
    defaults = _load_yaml(defaults_file) if defaults_file.is_file() else None
    return options, set(defaults or {})


def role_spec_entries(project: Project, role: str) -> list[dict[str, Any]]:
    """The options of every entry point of a role's argument spec (none without a spec)."""
    spec_file = project.roles / role / "meta" / "argument_specs.yml"
    if "{{" in role or not spec_file.is_file():
        return []
    specs = (_load_yaml(spec_file) or {}).get("argument_specs", {})
    return [dict((entry or {}).get("options") or {}) for entry in specs.values()]


def _hosts_of(pattern: str, inventory: Mapping[str, Any]) -> list[str]:
    root = inventory["all"]
    every = list(root.get("hosts") or {})
    names: list[str] = []
    for raw in re.split(r"[:,]", pattern):
        part = raw.strip()
        if part in {"all", "*"}:
            return every
        group = (root.get("children") or {}).get(part)
        if group is not None:
            names += [h for h in (group.get("hosts") or {}) if h not in names]
        elif part in every:
            names.append(part)
        elif part:
            return every  # a pattern we do not resolve: check every host rather than none
    return names


def _known_value(value: Any, hvars: Mapping[str, Any], where: str) -> tuple[bool, Any]:
    """(known before the run, value) for one role variable on one host."""
    if not isinstance(value, str):
        return True, value
    fact = _ONE_FACT.fullmatch(value.strip())
    if fact:
        if fact.group(1) not in hvars:
            raise BringupInputError(f"{where}: needs host fact {fact.group(1)}, which the host lacks")
        return True, hvars[fact.group(1)]
    return ("{{" not in value and "{%" not in value), value


def check_role_arguments(
    project: Project, playbook: str, inventory: Mapping[str, Any], extravars: Mapping[str, Any]
) -> None:
    """Raises BringupInputError (naming playbook, role, host and argument) on the first bad value."""
    hosts_vars: Mapping[str, Mapping[str, Any]] = inventory["all"]["hosts"]
    uses = list(role_uses(project, playbook))
    specs = {(u.role, u.entry): _role_spec(project, u.role, u.entry) for u in uses}
    by_role: dict[str, dict[str, Any]] = {}
    for (role, _), spec in specs.items():
        if spec is not None:
            by_role.setdefault(role, {}).update(spec[0])
    _check_extravars(extravars, by_role)
    for use in uses:
        spec = specs[(use.role, use.entry)]
        if spec is None:
            continue
        options, defaults = spec
        for name in use.variables:
            if name.startswith(f"{use.role}_") and name not in options:
                raise BringupInputError(
                    f"{use.playbook} play {use.play!r} role {use.role}: {name} is not an argument of the role"
                )
        role_extras = {k: v for k, v in extravars.items() if k in options}
        given = set(use.variables) | set(role_extras) | defaults
        missing = [n for n, o in options.items() if (o or {}).get("required") and n not in given]
        if missing:
            raise BringupInputError(
                f"{use.playbook} play {use.play!r} role {use.role}: required argument {missing[0]} is not set"
            )
        for host in _hosts_of(use.hosts, inventory):
            where = f"{use.playbook} play {use.play!r} role {use.role} host {host}"
            params = {}
            for name, value in {**use.variables, **role_extras}.items():
                if name in options:
                    known, resolved = _known_value(value, hosts_vars[host], f"{where}: {name}")
                    if known:
                        params[name] = resolved
            _validate(where, options, params)


def _check_extravars(extravars: Mapping[str, Any], options_by_role: Mapping[str, Mapping[str, Any]]) -> None:
    for name in extravars:
        for role in sorted(options_by_role, key=len, reverse=True):
            if name.startswith(f"{role}_"):
                if name not in options_by_role[role]:
                    raise BringupInputError(f"extra variable {name}: not an argument of role {role}")
                break


def _validate(where: str, options: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    # `required` was checked above against everything that sets a value; here only the values.
    subset = {n: {k: v for k, v in (options[n] or {}).items() if k != "required"} for n in params}
    result = ArgumentSpecValidator(subset).validate(dict(params))
    if result.error_messages:
        raise BringupInputError(f"{where}: {result.error_messages[0]}")
