"""The inventory contract (``HostVars``, docs/contracts.md), checked before any host is touched.

Strict on purpose: a YAML inventory written by hand (`flashfleet configure --inventory`) is
where a mistyped fact or a stray secret comes from, and Ansible would only notice mid-run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from flashfleet.bringup.errors import BringupInputError, NoInventory
from flashfleet.bringup.host_vars import HostVars
from flashfleet.catalog import hardware_catalog
from flashfleet.stack import safe_values

_SECRET_NAME = re.compile(r"token|secret|passw", re.IGNORECASE)
_HF_TOKEN_VALUE = re.compile(r"\bhf_[A-Za-z0-9]{20,}")


# pydantic's error type -> the type the fact must have, as the one-line message says it
_EXPECTED = {
    "int_type": "int",
    "string_type": "str",
    "bool_type": "bool",
    "list_type": "list",
    "tuple_type": "list",  # a sequence fact (a launch's argv...): a list in the inventory
    "dict_type": "dict",
    "model_type": "dict",
    "dataclass_type": "dict",
    "float_type": "float",
}


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problem(where: str, error: Any) -> str:
    at = f"{where}.{_loc(tuple(error['loc']))}"
    kind, value = error["type"], error.get("input")
    if kind == "missing":
        return f"{at}: missing (required by docs/contracts.md)"
    if kind in _EXPECTED:
        return f"{at}: expected {_EXPECTED[kind]}, got {type(value).__name__} {value!r}"
    if kind == "literal_error":
        return f"{at}: {value!r} is not one of {error['ctx']['expected']}"
    return f"{at}: {error['msg']}"


def _check_hardware(where: str, value: str) -> None:
    known = sorted(hardware_catalog())
    if value not in known:
        raise BringupInputError(f"{where}.flashfleet_hardware: {value!r} is not one of {', '.join(known)}")


# Facts that reach ssh, files and deletes: the stack spec's own rules, again for a hand-written
# inventory (`flashfleet configure --inventory`). Run after the model has checked the types.
_SAFE: dict[str, Callable[[Any], Any]] = {
    "ansible_host": safe_values.host_address,
    "ansible_user": safe_values.posix_user,
    "flashfleet_model_cache_dir": safe_values.host_path,
}


def _check_safe(where: str, hvars: Mapping[str, Any]) -> None:
    for name, check in _SAFE.items():
        value = hvars.get(name)
        if value is None:
            continue
        try:
            normal = check(value)
        except ValueError as err:
            raise BringupInputError(f"{where}.{name}: {err}") from None
        if normal != value and name == "flashfleet_model_cache_dir":
            raise BringupInputError(f"{where}.{name}: {value!r} is not normalised (write {normal})")
    for i, key in enumerate(hvars.get("flashfleet_host_keys") or []):
        try:
            safe_values.host_key(key)
        except ValueError as err:
            raise BringupInputError(f"{where}.flashfleet_host_keys[{i}]: {err}") from None


def check_host(where: str, hvars: Any) -> None:
    if not isinstance(hvars, Mapping):
        raise BringupInputError(f"{where}: expected a mapping of host variables")
    for name in hvars:
        if not isinstance(name, str) or not name.startswith(("ansible_", "flashfleet_")):
            raise BringupInputError(
                f"{where}.{name}: not an inventory fact (host variables are ansible_* or flashfleet_*;"
                " role arguments belong in the playbooks)"
            )
        if _SECRET_NAME.search(name):
            raise BringupInputError(
                f"{where}.{name}: secrets never go in the inventory (the HF token travels as "
                "FLASHFLEET_HF_TOKEN in the runner's environment)"
            )
        if name.startswith("flashfleet_") and name not in HostVars.model_fields:
            raise BringupInputError(f"{where}.{name}: unknown fact (see docs/contracts.md)")
    # Connection variables (ansible_port, ansible_connection...) pass as they are.
    facts = {k: v for k, v in hvars.items() if k.startswith("flashfleet_") or k in HostVars.model_fields}
    try:
        HostVars.model_validate(facts)
    except ValidationError as err:
        raise BringupInputError(_problem(where, err.errors()[0])) from None
    _check_hardware(where, hvars["flashfleet_hardware"])
    _check_safe(where, hvars)


def _group_members(where: str, group: Any) -> list[str]:
    if group is None:
        return []
    if not isinstance(group, Mapping):
        raise BringupInputError(f"{where}: expected a mapping with `hosts`")
    members = group.get("hosts") or {}
    if not isinstance(members, Mapping):
        raise BringupInputError(f"{where}.hosts: expected a mapping of host names")
    return [str(m) for m in members]


def check_inventory(inventory: Any, stack: str | None = None) -> list[str]:
    """Raises BringupInputError naming the first bad field; returns the host names."""
    root = inventory.get("all") if isinstance(inventory, Mapping) else None
    if not isinstance(root, Mapping):
        raise BringupInputError("all: the inventory has no `all` group (flashfleet.inventory's shape)")
    hosts = root.get("hosts")
    if not isinstance(hosts, Mapping) or not hosts:
        raise BringupInputError("all.hosts: no hosts")
    for name, hvars in hosts.items():
        check_host(f"all.hosts.{name}", hvars)
    stacks = {hvars["flashfleet_stack"] for hvars in hosts.values()}
    if len(stacks) > 1:
        raise BringupInputError(
            f"all.hosts.*.flashfleet_stack: several stacks in one inventory: {sorted(stacks)}"
        )
    if stack is not None and stacks != {stack}:
        raise BringupInputError(
            f"all.hosts.*.flashfleet_stack: the inventory is for {stacks.pop()!r}, not {stack!r}"
        )
    children = root.get("children") or {}
    if not isinstance(children, Mapping):
        raise BringupInputError("all.children: expected a mapping of groups")
    _check_groups(hosts, children)
    if _HF_TOKEN_VALUE.search(json.dumps(inventory, default=str)):
        raise BringupInputError(
            "all: a value looks like a Hugging Face token; secrets never go in the inventory"
        )
    return [str(h) for h in hosts]


def _check_groups(hosts: Mapping[str, Any], children: Mapping[str, Any]) -> None:
    members = {g: _group_members(f"all.children.{g}", grp) for g, grp in children.items()}
    for group, names in members.items():
        for name in names:
            if name not in hosts:
                raise BringupInputError(f"all.children.{group}.hosts.{name}: not a host of all.hosts")
            hvars = hosts[name]
            fact = {"vendor_": "flashfleet_vendor", "hw_": "flashfleet_hardware"}
            for prefix, key in fact.items():
                if group.startswith(prefix) and hvars[key] != group.removeprefix(prefix):
                    raise BringupInputError(
                        f"all.children.{group}.hosts.{name}: the host's {key} is {hvars[key]!r}"
                    )
    missing = [h for h in hosts if h not in members.get("flashfleet", [])]
    if missing:
        raise BringupInputError(
            f"all.children.flashfleet.hosts: misses {', '.join(missing)} (every node is in it)"
        )
    for name in members.get("mooncake_master", []):
        if not hosts[name]["flashfleet_mooncake"]:
            raise BringupInputError(
                f"all.children.mooncake_master.hosts.{name}: the host's flashfleet_mooncake is false"
            )


def endpoint_host(inventory: Mapping[str, Any]) -> str:
    """The host that serves the stack's endpoint: a cluster's router's (which cluster.router.host
    can put on a host of its own), else node 0."""
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    for name, hvars in hosts.items():
        procs = hvars.get("flashfleet_processes") or [] if isinstance(hvars, dict) else []
        if any(isinstance(p, dict) and p.get("role") == "router" and p.get("workers") for p in procs):
            return str(name)
    return node_zero(inventory)


def node_zero(inventory: Mapping[str, Any]) -> str:
    """The host of node 0 (flashfleet_node_index 0): a GPU worker, the stack's endpoint unless a
    cluster's router has a host of its own (endpoint_host)."""
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    for name, hvars in hosts.items():
        if isinstance(hvars, dict) and hvars.get("flashfleet_node_index") == 0:
            return str(name)
    raise NoInventory("the inventory has no node with flashfleet_node_index 0")
