"""Role arguments checked against each role's `meta/argument_specs.yml` before the run.

Playbooks map the inventory's `flashfleet_*` facts onto role arguments
(`preflight_gpu_count: "{{ flashfleet_gpu_count }}"`). Where a value is a literal, a direct
reference to one fact, or an extra variable, it is known before the run: check it per host
with Ansible's own validator, so a bad value is refused before any host is touched. Anything
more templated is left to the check Ansible runs when the role starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.playbook_walk import load_yaml, role_uses
from flashfleet.bringup.project import Project

_ONE_FACT = re.compile(r"^\{\{\s*(flashfleet_\w+)\s*\}\}$")


def _role_spec(project: Project, role: str, entry: str = "main") -> tuple[dict[str, Any], set[str]] | None:
    """(options of the entry point, names with a default), or None without a spec."""
    if "{{" in role:
        return None
    if not (project.roles / role).is_dir():
        raise BringupInputError(f"role {role}: not in {project.roles}")
    spec_file = project.roles / role / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        return None
    specs = (load_yaml(spec_file) or {}).get("argument_specs", {})
    if entry != "main" and entry not in specs:
        raise BringupInputError(f"role {role}: no entry point {entry!r} in its meta/argument_specs.yml")
    options = dict((specs.get(entry) or {}).get("options") or {})
    defaults_file = project.roles / role / "defaults" / "main.yml"
    defaults = load_yaml(defaults_file) if defaults_file.is_file() else None
    return options, set(defaults or {})


def role_spec_entries(project: Project, role: str) -> list[dict[str, Any]]:
    """The options of every entry point of a role's argument spec (none without a spec)."""
    spec_file = project.roles / role / "meta" / "argument_specs.yml"
    if "{{" in role or not spec_file.is_file():
        return []
    specs = (load_yaml(spec_file) or {}).get("argument_specs", {})
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
