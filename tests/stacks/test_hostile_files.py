"""A hostile checkout cannot exhaust the machine: a YAML alias bomb of a kilobyte, a lock that
is a link to /dev/zero, a FIFO, a huge file or a link to nothing are each refused by
`flashfleet validate` with exit 2 and one line, at once (the finding: 120 s and 4.7 GB for the
bomb, MemoryError for /dev/zero, a hang for the FIFO)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.lock import lock_file_name
from flashfleet.stack.yamlfile import MAX_BYTES

STACK = "h200-lowlat"


def _validate(folder: Path, timeout_s: float = 60) -> tuple[int, str, float]:
    """`flashfleet validate` in its own process: a hang or a memory blow-up fails the test
    instead of the test run."""
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "flashfleet", "validate", STACK, "--stacks-dir", str(folder)],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - began


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copy(DEFAULT_STACKS_DIR / f"Pulumi.{STACK}.yaml", tmp_path)
    return tmp_path


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        refs = ",".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_lock_is_refused_at_once(stacks: Path) -> None:
    text = _bomb()
    assert len(text) < 1024
    (stacks / lock_file_name(STACK)).write_text(text)
    rc, out, took = _validate(stacks)
    assert rc == 2, out
    assert "aliases expand it to more than" in out
    assert len(out.strip().splitlines()) == 1, out
    assert took < 30


def test_an_alias_bomb_in_the_stack_file_is_refused(stacks: Path) -> None:
    path = stacks / f"Pulumi.{STACK}.yaml"
    path.write_text(
        path.read_text()
        + "\n"
        + "\n".join(f"  {line}" for line in ["x:", *("  " + b for b in _bomb().splitlines())])
    )
    rc, out, took = _validate(stacks)
    assert rc == 2, out
    assert "aliases expand it" in out
    assert took < 30


def test_a_lock_that_links_to_dev_zero_is_refused(stacks: Path) -> None:
    (stacks / lock_file_name(STACK)).symlink_to("/dev/zero")
    rc, out, _ = _validate(stacks)
    assert rc == 2, out
    assert "not a regular file (a device or socket)" in out
    assert "MemoryError" not in out


def test_a_lock_that_is_a_fifo_does_not_hang(stacks: Path) -> None:
    os.mkfifo(stacks / lock_file_name(STACK))
    rc, out, took = _validate(stacks, timeout_s=30)
    assert rc == 2, out
    assert "not a regular file (a FIFO)" in out
    assert took < 30


def test_a_stack_file_that_is_a_fifo_does_not_hang(stacks: Path) -> None:
    path = stacks / f"Pulumi.{STACK}.yaml"
    path.unlink()
    os.mkfifo(path)
    rc, out, _ = _validate(stacks, timeout_s=30)
    assert rc == 2, out
    assert "not a regular file (a FIFO)" in out


def test_a_huge_lock_is_refused_unread(stacks: Path) -> None:
    with (stacks / lock_file_name(STACK)).open("wb") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: no disk used
    rc, out, _ = _validate(stacks)
    assert rc == 2, out
    assert "larger than 16 MiB" in out


def test_a_lock_that_links_to_nothing_is_refused_not_taken_for_none(stacks: Path) -> None:
    (stacks / lock_file_name(STACK)).symlink_to(stacks / "nowhere.yaml")
    rc, out, _ = _validate(stacks)
    assert rc == 2, out
    assert "a link to a file that does not exist" in out
