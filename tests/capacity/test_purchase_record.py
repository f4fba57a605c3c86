"""A paid, non-cancellable `capacity buy` leaves its own record under the runs folder
(`<runs>/<stack>/capacity/`), and says where. When that file cannot be written (a full disk, a
read-only folder) the record is printed instead, with one line naming the path, exit 1; the
stack file is still written. Faults are injected where the writes end: `io.open` for the bytes
(a full disk, as the lock's tests do) and `os.open`/`os.mkdir` for a read-only file system."""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from ec2_api import GB300, REGION, RID, client, offering, reservation

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR
from tests.cli.test_interrupt_and_full_disk import full_disk_below

START = (datetime.now(UTC) + timedelta(days=2)).replace(hour=11, minute=30, second=0, microsecond=0)
QUERY = {"CapacityDurationHours": 48, "InstanceType": GB300, "InstanceCount": 1}
STACK = "gb300-lowlat"


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copy(DEFAULT_STACKS_DIR / f"Pulumi.{STACK}.yaml", tmp_path)
    return tmp_path


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    """EC2 sells one block and the purchase goes through."""
    ec2, stub = client()
    monkeypatch.setattr("flashfleet.aws_client.ec2_client", lambda region: ec2)
    offer = offering("cbo-00000000000000001", start=START, zone="us-east-2b")
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]}, QUERY)
    stub.add_response(
        "purchase_capacity_block",
        {"CapacityReservation": reservation(state="payment-pending", start=START, zone="us-east-2b")},
    )
    with stub:
        yield stub
    stub.assert_no_pending_responses()


def _buy(stacks: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    argv = ["capacity", "buy", STACK, "--offering", "cbo-00000000000000001", "--hours", "48"]
    code = main([*argv, "--max-price", "2500", "--yes", "--stacks-dir", str(stacks)])
    out, err = capsys.readouterr()
    return code, out, err


def _check_record(record: dict[str, Any], stacks: Path) -> None:
    assert record["stack"] == STACK
    assert record["region"] == REGION
    assert record["stackFile"] == str((stacks / f"Pulumi.{STACK}.yaml").resolve())
    assert record["instanceType"] == GB300
    cap = record["capacity"]
    assert cap["reservationId"] == RID
    bought = cap["purchased"]
    assert bought["offeringId"] == "cbo-00000000000000001"
    assert bought["availabilityZone"] == "us-east-2b"
    assert bought["upfrontPriceUsd"] == 2400.0
    assert datetime.fromisoformat(bought["start"].replace("Z", "+00:00")) == START
    assert datetime.fromisoformat(bought["end"].replace("Z", "+00:00")) == START + timedelta(hours=48)


def _printed_record(out: str) -> dict[str, Any]:
    start = out.index("# A Capacity Block bought")
    return yaml.safe_load(out[start:])  # type: ignore[no-any-return]


def test_the_purchase_is_recorded_in_its_own_file_and_the_path_is_said(
    stacks: Path, ec2: Any, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _buy(stacks, capsys)
    assert code == 0, err
    [kept] = (runs_dir / STACK / "capacity").iterdir()
    assert kept.name.endswith(f"-{RID}.yaml")
    assert f"record of the purchase: {kept}" in out.splitlines()
    _check_record(yaml.safe_load(kept.read_text()), stacks)
    # owner-only, like the run directories beside it
    assert stat.S_IMODE((runs_dir / STACK / "capacity").stat().st_mode) == 0o700
    assert RID in (stacks / f"Pulumi.{STACK}.yaml").read_text()  # the stack file too


def test_a_full_disk_under_the_runs_folder_prints_the_record_and_names_the_path(
    stacks: Path,
    ec2: Any,
    runs_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_open = io.open
    monkeypatch.setattr(io, "open", full_disk_below(runs_dir, real_open))
    code, out, err = _buy(stacks, capsys)
    monkeypatch.setattr(io, "open", real_open)
    assert code == 1, err
    folder = runs_dir / STACK / "capacity"
    assert list(folder.iterdir()) == []  # no half record, no temporary file
    [line] = err.strip().splitlines()
    assert line.startswith(f"flashfleet capacity buy: {folder}/")
    assert "not written (No space left on device)" in line
    assert "the block IS bought: its record is printed above" in line
    _check_record(_printed_record(out), stacks)
    assert RID in (stacks / f"Pulumi.{STACK}.yaml").read_text()  # the stack file still holds it


@pytest.mark.parametrize("folder_exists", [True, False], ids=["file", "folder"])
def test_a_read_only_runs_folder_prints_the_record_and_names_the_path(
    stacks: Path,
    ec2: Any,
    runs_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    folder_exists: bool,
) -> None:
    """As root a chmod does not stop a write: the file system's answer is injected instead."""
    if folder_exists:
        (runs_dir / STACK / "capacity").mkdir(parents=True)
    real_open, real_mkdir = os.open, os.mkdir

    def read_only(real: Any) -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if str(path).startswith(str(runs_dir)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "open", read_only(real_open))
    monkeypatch.setattr(os, "mkdir", read_only(real_mkdir))
    code, out, err = _buy(stacks, capsys)
    monkeypatch.setattr(os, "open", real_open)
    monkeypatch.setattr(os, "mkdir", real_mkdir)
    assert code == 1, err
    [line] = err.strip().splitlines()
    assert line.startswith(f"flashfleet capacity buy: {runs_dir / STACK / 'capacity'}/")
    assert "not written (Read-only file system)" in line
    assert "the block IS bought" in line
    _check_record(_printed_record(out), stacks)
    assert RID in (stacks / f"Pulumi.{STACK}.yaml").read_text()


def test_when_both_files_fail_the_record_is_printed_once_and_each_path_named(
    stacks: Path,
    ec2: Any,
    runs_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = stacks / f"Pulumi.{STACK}.yaml"
    before = path.read_text()
    real_open = io.open
    monkeypatch.setattr(io, "open", full_disk_below(runs_dir, full_disk_below(stacks, real_open)))
    code, out, err = _buy(stacks, capsys)
    monkeypatch.setattr(io, "open", real_open)
    assert code == 1, err
    assert path.read_text() == before
    record_line, stack_line = err.strip().splitlines()
    assert str(runs_dir / STACK / "capacity") in record_line
    assert f"{path}: not written (No space left on device)" in stack_line
    assert out.count(f"reservationId: {RID}") == 1
    _check_record(_printed_record(out), stacks)
