"""`pulumi preview` of every existing-hosts catalog stack under the real Pulumi engine.

`flashfleet validate` says ok for each of them, so the engine's preview must agree: the program
resolves the stack, and the bring-up resource's provider checks the inventory as it arrives over
the engine's wire format. No host is contacted (a preview creates nothing), so none is booted.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR, list_stacks
from flashfleet.stack.files import stack_path

from .engine import pulumi_cli, pulumi_env, write_program

pytestmark = [
    pytest.mark.skipif(
        pulumi_cli() is None, reason="no Pulumi CLI: scripts/setup.d/40-pulumi.sh builds it into .tools/bin"
    ),
]
EXISTING = [s for s in list_stacks() if load_stack(s).spec.nodes.source.kind == "existing"]


@pytest.fixture(scope="module")
def project() -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-preview-", dir="/var/tmp"))
    try:
        write_program(workdir / "project")
        (workdir / "state").mkdir()
        yield workdir / "project"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def pulumi(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args, "--non-interactive"], cwd=project, env=pulumi_env(project.parent, project),
        text=True, capture_output=True, check=False, timeout=600,
    )  # fmt: skip


def test_the_catalog_has_existing_hosts_stacks() -> None:
    assert {"mi355x-agentx", "mi355x-lowlat"} <= set(EXISTING)


@pytest.mark.parametrize("stack", EXISTING)
def test_preview_of_a_catalog_stack_succeeds(project: Path, stack: str) -> None:
    # A copy of the catalog file: `stack init` adds the passphrase's salt to it.
    shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
    init = pulumi(project, "stack", "init", stack)
    assert init.returncode == 0, init.stdout + init.stderr
    done = pulumi(project, "preview", "--stack", stack)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "has a problem" not in out, out
    # the bring-up resource would be created
    assert "bringup" in out, out
    assert "create" in out, out
