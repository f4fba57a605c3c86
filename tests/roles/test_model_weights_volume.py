"""model_weights' weights volume (caches.weightsSnapshot) on real test hosts with a real block
device (a loop device): an empty volume is formatted ext4 and mounted at the cache by a systemd
mount unit before the download lands on it, a second run changes nothing, a copy of its bytes (what
a volume restored from an EBS snapshot holds) is mounted as it is and downloads nothing from the
Hub, and a disk holding another filesystem is refused, not formatted.

Only the choice of the disk is given (`_model_weights_volume_disks`): a test host has no EBS disk,
and what picks one by its model is tests/unit/test_weights_volume_disk.py."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosts.harness import HostSpec

from .conftest import Lab, assert_no_change, open_lab
from .hardware import MODEL, NVIDIA_DEVICES

CACHE = "/var/lib/flashfleet/hf"
HOSTS = ("vol", "restored", "foreign")


def _loop(image: Path) -> str:
    return subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def disks() -> Iterator[dict[str, tuple[Path, str]]]:
    """A loop device per host, on a sparse file: host -> (file, device)."""
    folder = Path(tempfile.mkdtemp(prefix="flashfleet-volumes-", dir="/var/tmp"))
    out: dict[str, tuple[Path, str]] = {}
    try:
        for host in HOSTS:
            image = folder / f"{host}.img"
            with image.open("wb") as f:
                f.truncate(256 * 2**20)
            out[host] = (image, _loop(image))
        subprocess.run(["mkswap", out["foreign"][1]], capture_output=True, check=True)  # someone's swap
        yield out
    finally:
        for _, device in out.values():
            subprocess.run(["losetup", "--detach", device], check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(disks: dict[str, tuple[Path, str]]) -> Iterator[Lab]:
    specs = [HostSpec(h, {}, NVIDIA_DEVICES, block_devices=(disks[h][1],)) for h in HOSTS]
    with open_lab(specs, groups=dict.fromkeys(HOSTS, "h200")) as opened:
        yield opened


def _run(lab: Lab, disks: dict[str, tuple[Path, str]], host: str) -> Any:
    return lab.play(
        [host],
        "model_weights",
        facts_override={host: {"flashfleet_weights_volume": True}},
        extravars={"_model_weights_volume_disks": [Path(disks[host][1]).name]},
    )


def _mounted(lab: Lab, host: str) -> str:
    return lab.pool.ssh(
        host, f"findmnt --noheadings --output SOURCE,FSTYPE {CACHE}", check=False
    ).stdout.strip()


def test_an_empty_volume_is_formatted_mounted_and_holds_the_download(lab: Lab, disks) -> None:
    device = disks["vol"][1]
    run = _run(lab, disks, "vol")
    assert run.ok, run.explain()
    assert "model_weights:ext4 on an empty volume" in run.changed_tasks("vol")
    assert _mounted(lab, "vol") == f"{device} ext4"
    # the download landed on the volume: its marker is on that filesystem
    marker = lab.pool.ssh("vol", f"ls {CACHE}/.flashfleet-complete").stdout.split()
    assert [m.split("@")[0] for m in marker] == [MODEL.replace("/", "--")]
    unit = lab.pool.ssh("vol", "systemctl is-enabled var-lib-flashfleet-hf.mount").stdout.strip()
    assert unit == "enabled"
    assert_no_change(_run(lab, disks, "vol"))


def test_a_copy_of_its_bytes_is_mounted_as_it_is_and_downloads_nothing(lab: Lab, disks) -> None:
    if not _mounted(lab, "vol"):
        assert _run(lab, disks, "vol").ok
    lab.pool.ssh("vol", "sync")
    source, _ = disks["vol"]
    restored, device = disks["restored"]
    subprocess.run(["dd", f"if={source}", f"of={device}", "bs=4M", "conv=fsync", "status=none"], check=True)
    before = len(lab.hub.requests)
    run = _run(lab, disks, "restored")
    assert run.ok, run.explain()
    assert "model_weights:ext4 on an empty volume" not in run.changed_tasks("restored")
    assert _mounted(lab, "restored") == f"{device} ext4"
    assert lab.hub.requests[before:] == []  # the markers came with the bytes
    assert restored.exists()


def test_a_disk_with_another_filesystem_is_refused_not_formatted(lab: Lab, disks) -> None:
    device = disks["foreign"][1]
    run = _run(lab, disks, "foreign")
    assert not run.ok
    [failure] = run.result.failures
    assert failure.message.startswith(f"the weights volume {device} holds swap, not the ext4"), (
        failure.message
    )
    assert lab.pool.ssh("foreign", f"blkid -o value -s TYPE {device}").stdout.strip() == "swap"
    assert _mounted(lab, "foreign") == ""
