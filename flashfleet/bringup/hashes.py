"""Content hashes that decide whether the playbooks must run again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# Connection details say how to reach a node, not what runs on it: changing the SSH key path or
# the interpreter must not redeploy. `ansible_host` stays: a new address is a new machine.
_KEPT_ANSIBLE_VARS = {"ansible_host"}


def _is_volatile(name: str) -> bool:
    return name.startswith("ansible_") and name not in _KEPT_ANSIBLE_VARS


def stable_inventory(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """The inventory without volatile host variables (same groups, same facts)."""
    root = dict(inventory.get("all", {}))
    hosts = root.get("hosts", {}) or {}
    root["hosts"] = {
        name: {k: v for k, v in (hvars or {}).items() if not _is_volatile(k)} for name, hvars in hosts.items()
    }
    return {**inventory, "all": root}


def content_hash(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def inventory_hash(inventory: Mapping[str, Any]) -> str:
    return content_hash(stable_inventory(inventory))
