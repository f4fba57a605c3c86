"""A careless moment must not cost a file or show a traceback: a disk that fills half way through
`flashfleet lock --update` or through the stack-file write after a paid `capacity buy` leaves
the old file whole (exit 1, one line naming it); Ctrl-C in an offline command is exit 130 and
one line. The full disk is simulated where every write of these paths ends (`io.open`, which
both `Path.write_text` and `os.fdopen` call): the first half of the text lands, then ENOSPC."""

from __future__ import annotations

import errno
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.lock import LockedFile, LockedRepo, StackLock, dump_lock, lock_file_name
from flashfleet.user_files import UserFileError, write_text_atomically
from tests.cli.terminal import sigint_as_at_a_terminal

MODEL = "zai-org/GLM-5.3-Flash"


class _HalfThenFull:
    """A file whose first write lands half its bytes, then the disk is full."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def write(self, data: Any) -> int:
        self.real.write(data[: len(data) // 2])
        self.real.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __enter__(self) -> _HalfThenFull:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(io, "open", full_disk_below(tmp_path, io.open))


def full_disk_below(root: Path, real_open: Any) -> Any:
    """`io.open` where every file opened for writing below `root` fills the disk half way."""

    def opening(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        # an open descriptor (os.fdopen) is named by the file it points to
        name = os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else str(file)
        inside = Path(name).is_relative_to(root)
        return _HalfThenFull(handle) if inside and any(m in mode for m in "wax+") else handle

    return opening


def test_the_helper_leaves_the_old_file_and_no_temporary_one(tmp_path: Path, full_disk: None) -> None:
    path = tmp_path / "kept.yaml"
    io.FileIO(path, "w").write(b"old: whole\n")  # below io.open: not the full disk
    with pytest.raises(
        UserFileError, match=rf"^{path}: not written \(No space left on device\); it is as it was$"
    ):
        write_text_atomically(path, "new: " + "x" * 10000 + "\n")
    assert path.read_bytes() == b"old: whole\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.yaml"]


def test_a_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere"
    link = tmp_path / "stack.lock.yaml"
    link.symlink_to(victim)  # dangling: writing through it would create `elsewhere`
    write_text_atomically(link, "new\n")
    assert not victim.exists()
    assert not link.is_symlink()
    assert link.read_text() == "new\n"


def _lock(commit: str) -> StackLock:
    files = {"config.json": LockedFile(size=2, git_oid="d" * 40)}
    repo = LockedRepo(revision="main", commit=commit, files=files)
    return StackLock(stack="h200-lowlat", locked_on="2026-12-01", weights={MODEL: repo})


def test_lock_update_on_a_full_disk_keeps_the_old_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flashfleet import image_registry, package_index
    from flashfleet.cli import lock as lock_cli
    from flashfleet.stack.lock import LockedImage, LockedPackage, LockedPackageFile

    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml", tmp_path)
    old_text = dump_lock(_lock("a" * 40))
    lock_file = tmp_path / lock_file_name("h200-lowlat")
    io.FileIO(lock_file, "w").write(old_text.encode())
    # what the Hub, the registry and the indexes answer today: main moved
    moved = _lock("b" * 40).weights[MODEL]
    digest = "sha256:" + "c" * 64
    monkeypatch.setattr(lock_cli, "resolve_repo", lambda repo, revision, endpoint, **_: moved)
    monkeypatch.setattr(
        image_registry,
        "resolve_image",
        lambda *a: (LockedImage(digest=digest, platforms={"linux/amd64": digest}), {}),
    )
    monkeypatch.setattr(lock_cli, "resolve_image_apt", lambda *a, **k: {})
    monkeypatch.setattr(
        package_index,
        "resolve_package",
        lambda name, *a, **k: LockedPackage(
            version="1.0", files={f"{name}.whl": LockedPackageFile(sha256="e" * 64)}
        ),
    )
    monkeypatch.setattr(lock_cli, "resolve_apt", lambda *a: {})
    monkeypatch.setattr(lock_cli, "resolve_amis", lambda *a: {})
    real_open = io.open
    monkeypatch.setattr(io, "open", full_disk_below(tmp_path, real_open))
    rc = main(["lock", "h200-lowlat", "--stacks-dir", str(tmp_path), "--update"])
    monkeypatch.setattr(io, "open", real_open)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert err.strip().splitlines() == [
        f"flashfleet lock: {lock_file}: not written (No space left on device); it is as it was"
    ]
    assert lock_file.read_text() == old_text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["Pulumi.h200-lowlat.yaml", lock_file.name])


@pytest.mark.parametrize("signum", [signal.SIGINT])
def test_ctrl_c_in_an_offline_command_is_one_line_and_130(tmp_path: Path, signum: int) -> None:
    """A real SIGINT to a real `flashfleet validate` process, while it works."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = tmp_path / "started"
    # validate every catalog stack again and again inside one command, until interrupted: the
    # signal lands in the middle of the command's own work, wherever that is
    code = (
        "import pathlib, sys\n"
        "import flashfleet.cli.validate as validate\n"
        "from flashfleet.cli import main\n"
        "once = validate.run\n"
        "def forever(args):\n"
        f"    pathlib.Path({str(started)!r}).touch()\n"
        "    while True:\n"
        "        once(args)\n"
        "validate.run = forever\n"
        "sys.exit(main(['validate']))\n"
    )
    with sigint_as_at_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # inside main(), not at start-up
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["flashfleet validate: interrupted"]


def test_ctrl_c_is_caught_whatever_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flashfleet.cli import plan as plan_cli

    def interrupted(_: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_cli, "run", interrupted)
    assert main(["plan", "h200-lowlat"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "flashfleet plan: interrupted\n"
    assert "Traceback" not in captured.out


def test_a_read_only_folder_is_one_line_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flashfleet.cli import plan as plan_cli

    def read_only(_: object) -> int:
        raise PermissionError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "runs"))

    monkeypatch.setattr(plan_cli, "run", read_only)
    assert main(["plan", "h200-lowlat"]) == 1
    assert capsys.readouterr().err == f"flashfleet plan: {tmp_path / 'runs'}: Read-only file system\n"
