"""The inventory contract of docs/contracts.md, checked before any host is touched.

Strict on purpose: a YAML inventory written by hand (`flashfleet configure --inventory`) is
where a mistyped fact or a stray secret comes from, and Ansible would only notice mid-run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from flashfleet.bringup.errors import BringupInputError
from flashfleet.catalog import hardware_catalog
from flashfleet.stack import safe_values

# fact -> (expected type(s), required); bool is not an int here, whatever Python says.
_FACTS: dict[str, tuple[tuple[type, ...], bool]] = {
    "ansible_host": ((str,), True),
    "ansible_user": ((str,), False),
    "flashfleet_stack": ((str,), True),
    "flashfleet_hardware": ((str,), True),
    "flashfleet_vendor": ((str,), True),
    "flashfleet_arch": ((str,), True),
    "flashfleet_gpu_count": ((int,), True),
    "flashfleet_gpu_model": ((str,), True),
    # null: the catalog does not know the instance's memory (p6e-gb300); preflight then only
    # checks that the HiCache host tier fits what the node has.
    "flashfleet_host_memory_gb": ((int, type(None)), False),
    "flashfleet_hicache_host_gb": ((int,), True),
    "flashfleet_node_index": ((int,), True),
    "flashfleet_model": ((str,), True),
    "flashfleet_draft_model": ((str, type(None)), False),
    "flashfleet_image": ((str,), True),
    "flashfleet_model_cache_dir": ((str,), True),
    "flashfleet_mooncake": ((bool,), True),
    "flashfleet_processes": ((list,), True),
    "flashfleet_mooncake_layout": ((dict,), False),
    # missing: keep (teardown.yml's default); false deletes the weight cache on teardown
    "flashfleet_keep_caches": ((bool,), False),
    # optional: the node's SSH public keys, pinned for every run (flashfleet.bringup.playbook_run)
    "flashfleet_host_keys": ((list,), False),
}
_SECRET_NAME = re.compile(r"token|secret|passw", re.IGNORECASE)
_HF_TOKEN_VALUE = re.compile(r"\bhf_[A-Za-z0-9]{20,}")


def restore_nulls(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """Puts back the facts whose value is null: Pulumi's wire format drops null-valued keys,
    and a playbook that reads `flashfleet_draft_model` must find it defined."""
    nullable = [name for name, (types, _) in _FACTS.items() if type(None) in types]
    root = dict(inventory.get("all") or {})
    hosts = root.get("hosts")
    if isinstance(hosts, Mapping):
        root["hosts"] = {
            h: ({**{n: None for n in nullable}, **v} if isinstance(v, Mapping) else v)
            for h, v in hosts.items()
        }
    return {**inventory, "all": root}


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _type_name(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _check_choices(where: str, name: str, value: Any) -> None:
    catalog = hardware_catalog()
    choices: dict[str, list[str]] = {
        "flashfleet_hardware": sorted(catalog),
        "flashfleet_vendor": sorted({hw.vendor for hw in catalog.values()}),
        "flashfleet_arch": sorted({hw.arch for hw in catalog.values()}),
    }
    allowed = choices.get(name)
    if allowed is not None and value not in allowed:
        raise BringupInputError(f"{where}.{name}: {value!r} is not one of {', '.join(allowed)}")


# Facts that reach ssh, files and deletes: the stack spec's own rules, again for a hand-written
# inventory (`flashfleet configure --inventory`).
_SAFE: dict[str, Callable[[Any], Any]] = {
    "ansible_host": safe_values.host_address,
    "ansible_user": safe_values.posix_user,
    "flashfleet_model_cache_dir": safe_values.host_path,
    "flashfleet_host_keys": list,
}


def _check_safe(where: str, name: str, value: Any) -> None:
    check = _SAFE.get(name)
    if check is None:
        return
    try:
        normal = check(value)
    except ValueError as err:
        raise BringupInputError(f"{where}.{name}: {err}") from None
    if name == "flashfleet_host_keys":
        for i, key in enumerate(value):
            try:
                safe_values.host_key(key if isinstance(key, str) else "")
            except ValueError as err:
                raise BringupInputError(f"{where}.{name}[{i}]: {err}") from None
    if normal != value and name == "flashfleet_model_cache_dir":
        raise BringupInputError(f"{where}.{name}: {value!r} is not normalised (write {normal})")


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
        if name.startswith("flashfleet_") and name not in _FACTS:
            raise BringupInputError(f"{where}.{name}: unknown fact (see docs/contracts.md)")
    for name, (types, required) in _FACTS.items():
        if name not in hvars:
            if required:
                raise BringupInputError(f"{where}.{name}: missing (required by docs/contracts.md)")
            continue
        value = hvars[name]
        if not _type_ok(value, types):
            raise BringupInputError(
                f"{where}.{name}: expected {_type_name(types)}, got {type(value).__name__} {value!r}"
            )
        _check_choices(where, name, value)
        _check_safe(where, name, value)
    for i, launch in enumerate(hvars["flashfleet_processes"]):
        if not (isinstance(launch, Mapping) and isinstance(launch.get("name"), str)):
            raise BringupInputError(f"{where}.flashfleet_processes[{i}]: expected a launch with a name")
        argv = launch.get("argv")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            raise BringupInputError(f"{where}.flashfleet_processes[{i}].argv: expected a list of strings")


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
