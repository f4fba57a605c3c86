"""container_runtime on real hosts: pinned Docker with the nvidia runtime (or CDI) on NVIDIA,
ROCm device access on AMD; the daemon really restarts to pick its configuration up."""

from __future__ import annotations

import json

from .conftest import Lab, assert_no_change, assert_same_plan, host_state


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
