"""`pulumi preview` of every existing-hosts catalog stack under the real Pulumi engine.

`flashfleet validate` says ok for each of them, so the engine's preview must agree: the program
resolves the stack, and the bring-up resource's provider checks the inventory as it arrives over
the engine's wire format. No host is contacted (a preview creates nothing), so none is booted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

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


# Each existing-hosts catalog stack moved to other hardware: validate and the engine's preview
# must give the same answer (both ok, or both refuse), so `validate: ok` keeps meaning
# "previews". "clean" also drops the options and image claims that belong to the old hardware
# (the stack should then be valid); "as is" keeps them (it may be refused: then both refuse).
GPUS_PER_NODE = {"gb300": 4, "h200": 8, "mi355x": 8}
MUTATIONS = [
    (stack, hardware, clean)
    for i, stack in enumerate(EXISTING)
    for hardware, clean in (
        (sorted(set(GPUS_PER_NODE) - {load_stack(stack).spec.hardware})[i % 2], True),
        *([("h200", False)] if i == 0 else []),
    )
]


def _moved(stack: str, hardware: str, clean: bool) -> str:
    data = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text(encoding="utf-8"))
    spec = data["config"]["flashfleet:stack"]
    spec["hardware"] = hardware
    for host in spec["nodes"]["source"]["hosts"]:
        host["gpus"] = {"model": hardware, "count": GPUS_PER_NODE[hardware]}
    if clean:
        spec.pop("options", None)
        spec.get("image", {}).pop("includes", None)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize(
    ("stack", "hardware", "clean"),
    MUTATIONS,
    ids=[f"{s}-to-{h}-{'clean' if c else 'as-is'}" for s, h, c in MUTATIONS],
)
def test_validate_and_preview_agree_on_a_stack_moved_to_other_hardware(
    project: Path, stack: str, hardware: str, clean: bool
) -> None:
    name = f"{stack}-{hardware}-{'clean' if clean else 'as-is'}"
    path = stack_path(name, project / "stacks")
    path.write_text(_moved(stack, hardware, clean), encoding="utf-8")
    validated = subprocess.run(
        [sys.executable, "-m", "flashfleet", "validate", "--stacks-dir", str(project / "stacks"), name],
        text=True, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert validated.returncode in (0, 2), validated.stdout + validated.stderr
    if clean:
        assert validated.returncode == 0, f"the clean move should be valid: {validated.stderr}"
    init = pulumi(project, "stack", "init", name)
    assert init.returncode == 0, init.stdout + init.stderr
    previewed = pulumi(project, "preview", "--stack", name)
    said = f"validate: {validated.stdout}{validated.stderr}\npreview: {previewed.stdout}{previewed.stderr}"
    assert (validated.returncode == 0) == (previewed.returncode == 0), said
