from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.project import Project

from .engine import ProviderHost
from .inventories import PROJECT, TOKEN, inventory, local_host

# These tests' nodes are this machine: the cache directories the test roles fill sit below a root
# the host-path rule admits (flashfleet.stack.safe_values), as a real node's would.
CACHE_ROOT = Path("/var/cache/flashfleet")


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="tests-", dir=CACHE_ROOT))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def provider_host(tmp_path: Path) -> Iterator[ProviderHost]:
    host = ProviderHost(tmp_path)
    try:
        yield host
    finally:
        host.close()


def resource_inputs(
    tmp_path: Path, inv: dict[str, Any], project: Path = PROJECT, **extra: Any
) -> dict[str, Any]:
    """The inputs `attach()` registers, as the engine hands them to the provider (the inventory and
    the extra variables as JSON strings)."""
    extravars = extra.pop("extravars", {})
    return {
        "inventory": json.dumps(inv),
        "hfToken": TOKEN,
        "playbook": "site.yml",
        "teardownPlaybook": "teardown.yml",
        "extravars": json.dumps(extravars),
        "projectDir": str(project),
        "runsDir": str(tmp_path / "runs"),
        "treeHash": Project(project).tree_hash(),
        "runDir": None,
        "changed": None,
        **extra,
    }


@pytest.fixture
def two_local_nodes(tmp_path: Path) -> dict[str, Any]:
    return inventory(
        "t1", {"node-0": (local_host(), tmp_path / "n0"), "node-1": (local_host(), tmp_path / "n1")}
    )
