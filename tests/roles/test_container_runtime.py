"""container_runtime on real hosts: pinned Docker with the nvidia runtime (or CDI) on NVIDIA,
ROCm device access on AMD; the daemon really restarts to pick its configuration up."""

from __future__ import annotations

import json
from typing import Any

from hosts.aptindex import role_locks_of

from .conftest import Lab, Run, assert_no_change, assert_same_plan, host_state


def test_h200_check_mode_then_converge_then_nothing_left(lab: Lab) -> None:
    before = host_state(lab, "h200")
    check = lab.play(["h200"], "container_runtime", check=True)
    assert check.ok, check.explain()
    assert host_state(lab, "h200") == before

    run = lab.play(["h200"], "container_runtime")
    assert run.ok, run.explain()
    assert_same_plan(check, run, "h200")
    versions = lab.pool.ssh("h200", "dpkg-query -W docker-ce nvidia-container-toolkit").stdout
    assert "docker-ce\t5:29.1.3-1~debian.12~bookworm" in versions
    assert "nvidia-container-toolkit\t1.20.1-1" in versions
    daemon = json.loads(lab.pool.ssh("h200", "cat /etc/docker/daemon.json").stdout)
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert daemon["default-runtime"] == "nvidia"
    # the stand-in daemon reads daemon.json only at start: the runtime shows after the restart
    runtimes = lab.pool.ssh("h200", "docker info --format '{{json .Runtimes}}'").stdout
    assert "nvidia" in json.loads(runtimes)

    again = lab.play(["h200"], "container_runtime")
    assert_no_change(again)


def test_cdi_mode_writes_a_spec_for_the_gpus_once(lab: Lab) -> None:
    cdi = {"container_runtime_nvidia_mode": "cdi"}
    run = lab.play(["gb300a"], "container_runtime", extravars=cdi)
    assert run.ok, run.explain()
    spec = lab.pool.ssh("gb300a", "cat /etc/cdi/nvidia.yaml").stdout
    assert spec.count("path: /dev/nvidia0") == 2  # device 0 and "all"
    assert "path: /dev/nvidia3" in spec
    assert "/dev/nvidia4" not in spec
    assert lab.play(["gb300a"], "container_runtime", extravars=cdi).changed() == 0


def test_mi355x_gets_docker_without_nvidia_runtime(lab: Lab) -> None:
    run = lab.play(["mi355x"], "container_runtime")
    assert run.ok, run.explain()
    daemon = json.loads(lab.pool.ssh("mi355x", "cat /etc/docker/daemon.json").stdout)
    assert "runtimes" not in daemon
    assert lab.pool.ssh("mi355x", "systemctl is-active docker").stdout.strip() == "active"
    assert lab.play(["mi355x"], "container_runtime").changed() == 0


def test_missing_rocm_device_is_named(lab: Lab) -> None:
    run = lab.play(["mi355x"], "container_runtime",
                   extravars={"container_runtime_amd_devices": ["/dev/kfd", "/dev/dri/renderD200"]})  # fmt: skip
    assert not run.ok
    assert "Missing on mi355x: /dev/dri/renderD200" in run.result.failures[0].message


def test_docker_and_the_toolkit_install_only_as_the_stack_s_lock_holds_them(lab: Lab) -> None:
    """`flashfleet lock`'s resolution of the lab's Docker and toolkit repositories (those these
    Debian 12 hosts' sources name), as the inventory hands it: what apt would install from each is
    checked against it before anything is installed."""
    locks = role_locks_of(lab.repo_vars(), "h200")
    lock = locks["container_runtime"]
    docker = f"{lab.base_url}/docker/linux/debian/dists/bookworm/stable/binary-amd64/"
    toolkit = f"{lab.base_url}/libnvidia-container/stable/deb/amd64/"
    assert {docker, toolkit} <= set(lock)
    assert lock[toolkit]["nvidia-container-toolkit"]["version"] == "1.20.1-1"

    def play(held: dict[str, Any]) -> Run:
        # the toolkit gone again: its install (and its check) has something to do
        lab.pool.ssh("h200", "dpkg --purge nvidia-container-toolkit")
        return lab.play(
            ["h200"],
            "container_runtime",
            facts_override={"h200": {"flashfleet_apt_lock": {"container_runtime": held}}},
        )

    run = play(lock)
    assert run.ok, run.explain()
    checked = [
        t for t, status in run.statuses("h200").items() if t == "apt_lock:the packages are the locked ones"
    ]
    assert checked, run.statuses("h200")
    versions = lab.pool.ssh("h200", "dpkg-query -W docker-ce nvidia-container-toolkit").stdout
    assert f"docker-ce\t{lock[docker]['docker-ce']['version']}" in versions
    assert "nvidia-container-toolkit\t1.20.1-1" in versions

    # the toolkit's index lists other bytes than the lock: stopped before apt installs, named
    other = {
        **lock,
        toolkit: {
            "nvidia-container-toolkit": {**lock[toolkit]["nvidia-container-toolkit"], "sha256": "0" * 64}
        },
    }
    refused = play(other)
    assert not refused.ok
    message = refused.result.failures[0].message
    assert "the NVIDIA container toolkit's apt packages differ from the stack's lock" in message
    assert "nvidia-container-toolkit 1.20.1-1: the repository lists sha256 " in message
    absent = lab.pool.ssh("h200", "dpkg-query -W nvidia-container-toolkit 2>/dev/null || echo absent").stdout
    assert absent.strip() == "absent"
    # a lock without Docker's directory for this distribution: named
    missing = play({toolkit: lock[toolkit]})
    assert f"has no entry for {docker}" in missing.result.failures[0].message

    restored = play(lock)
    assert restored.ok, restored.explain()
