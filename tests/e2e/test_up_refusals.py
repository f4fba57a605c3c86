"""`flashfleet up` refuses a stack whose own secret breaks the secret rule: exit 2, one line,
before Pulumi previews or registers anything (the real engine decrypts the stack's config).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.files import stack_path

from .engine import pulumi_cli, pulumi_env, write_program

pytestmark = [
    pytest.mark.skipif(
        pulumi_cli() is None, reason="no Pulumi CLI: scripts/setup.d/40-pulumi.sh builds it into .tools/bin"
    ),
]
STACK = "mi355x-lowlat"  # existing hosts: no cloud credentials needed to get as far as the program


@pytest.fixture
def project() -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-up-", dir="/var/tmp"))
    try:
        write_program(workdir / "project")
        (workdir / "state").mkdir()
        doc = yaml.safe_load(stack_path(STACK, DEFAULT_STACKS_DIR).read_text())
        # The catalog's example hosts have no keys to pin; this test stops before any host.
        doc["config"]["flashfleet:stack"]["nodes"]["source"]["allowUnpinnedHostKeys"] = True
        stack_path(STACK, workdir / "project/stacks").write_text(yaml.safe_dump(doc))
        yield workdir / "project"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run(project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), cwd=project, env=pulumi_env(project.parent, project), text=True,
        capture_output=True, check=False, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("flashfleet:hfToken", "hf_short", "secret-min-length"),
        ("flashfleet:apiKey", "true", "secret-not-event-word"),
    ],
)
def test_up_refuses_an_unsafe_stack_secret_before_anything_runs(
    project: Path, key: str, value: str, rule: str
) -> None:
    assert run(project, "pulumi", "stack", "init", STACK, "--non-interactive").returncode == 0
    assert run(project, "pulumi", "config", "set", "--secret", key, value, "--stack", STACK).returncode == 0
    exe = Path(sys.executable).with_name("flashfleet")
    done = run(project, str(exe), "up", STACK, "--yes")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert key in lines[0], lines
    assert f"[rule: {rule}]" in lines[0], lines
    assert value not in done.stdout + done.stderr.replace(key, "")  # the secret is never quoted
    assert "pulumi preview" not in done.stdout, done.stdout  # nothing ran
    exported = json.loads(run(project, "pulumi", "stack", "export", "--stack", STACK).stdout)
    assert not exported["deployment"].get("resources"), exported


def test_a_safe_stack_secret_passes_the_check(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check refuses only what breaks the rule: a long random token, decrypted by the same
    # engine, passes (the counterpart that keeps the refusal above from being unconditional).
    from flashfleet.cli.shared import stackops

    assert run(project, "pulumi", "stack", "init", STACK, "--non-interactive").returncode == 0
    token = "hf_x7Kq2LmP9vR4tW8yZ1bN3cD5fG6hJ0aS"
    set_token = run(
        project, "pulumi", "config", "set", "--secret", "flashfleet:hfToken", token, "--stack", STACK
    )
    assert set_token.returncode == 0, set_token.stderr
    for k, v in pulumi_env(project.parent, project).items():
        monkeypatch.setenv(k, v)
    stackops.check_secrets(STACK)  # raises BringupInputError on a refusal


def test_a_program_error_is_reported_once_by_the_engine(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The program refuses the stack (a token for unpinned hosts) with a RunError: the language
    # host has logged it, so the engine must not print it again as "an unhandled error occurred".
    from flashfleet.cli.shared import stackops

    path = stack_path(STACK, project / "stacks")
    doc = yaml.safe_load(path.read_text())
    del doc["config"]["flashfleet:stack"]["nodes"]["source"]["allowUnpinnedHostKeys"]
    path.write_text(yaml.safe_dump(doc))
    assert run(project, "pulumi", "stack", "init", STACK, "--non-interactive").returncode == 0
    token = "hf_x7Kq2LmP9vR4tW8yZ1bN3cD5fG6hJ0aS"
    assert (
        run(
            project, "pulumi", "config", "set", "--secret", "flashfleet:hfToken", token, "--stack", STACK
        ).returncode
        == 0
    )
    done = run(project, "pulumi", "preview", "--stack", STACK, "--non-interactive")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "an unhandled error occurred" not in out, out
    diagnostics = out[out.index("Diagnostics:") :]
    assert diagnostics.count("[rule: host-key-unpinned]") == 1, diagnostics
    assert "Traceback" not in out, out
    # ...and `flashfleet up`'s one line still names the program's error, not an empty stderr.
    for k, v in pulumi_env(project.parent, project).items():
        monkeypatch.setenv(k, v)
    with pytest.raises(stackops.PulumiError, match=r"\[rule: host-key-unpinned\]"):
        stackops.preview(STACK, lambda _line: None)


def test_up_preview_shows_the_plan_and_creates_nothing(project: Path) -> None:
    # No terminal and no --yes: a preview asks nothing, so it is not refused as `up` would be.
    assert run(project, "pulumi", "stack", "init", STACK, "--non-interactive").returncode == 0
    exe = Path(sys.executable).with_name("flashfleet")
    done = run(project, str(exe), "up", STACK, "--preview")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "pulumi preview:" in done.stdout, done.stdout
    assert "bringup" in done.stdout, done.stdout  # the resource it would create
    assert done.stdout.rstrip().endswith(f"flashfleet up {STACK}: preview only, nothing created or changed")
    exported = json.loads(run(project, "pulumi", "stack", "export", "--stack", STACK).stdout)
    assert not exported["deployment"].get("resources"), exported
    # the same stack refused by the program: the preview fails and `up --preview` says so, exit 1
    path = stack_path(STACK, project / "stacks")
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"]["nodes"]["source"]["hosts"][0]["gpus"]["count"] = 3
    path.write_text(yaml.safe_dump(doc))
    refused = run(project, str(exe), "up", STACK, "--preview")
    assert refused.returncode in (1, 2), (refused.stdout, refused.stderr)
    assert "preview only" not in refused.stdout
