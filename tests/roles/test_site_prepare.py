"""The whole of playbooks/prepare.yml on an NVIDIA and an AMD node together: every play picks
its hosts by inventory group, and a second run of everything changes nothing. Then on a
router's own host (a CPU machine): Docker and the image, nothing of the GPU stack or weights."""

from __future__ import annotations

import json

from .conftest import Lab, assert_no_change
from .hardware import ROUTER_HOST, derived_image
from .test_preflight import SMALL_SIZES


def test_prepare_converges_h200_and_mi355x_together(lab: Lab) -> None:
    hosts = ["h200", "mi355x"]
    first = lab.play(hosts, "all", extravars=SMALL_SIZES)
    assert first.ok, first.explain()
    roles = {(p.host, p.role) for p in first.progress if p.role}
    assert ("h200", "nvidia_driver") in roles
    assert ("mi355x", "rocm_driver") in roles
    assert ("mi355x", "nvidia_driver") not in roles
    assert ("h200", "rocm_driver") not in roles
    # the download runs in the background from before the driver to after the image (what
    # bringup.toml's host lanes model): started first, waited for last
    steps = [(p.role, p.phase, p.task, p.status) for p in first.progress if p.host == "mi355x" and p.role]
    # (the job's start reports no change: the wait reports what the job installed and downloaded)
    started = steps.index(("model_weights", "start", "client and downloads, one background job", "ok"))
    driver = [i for i, step in enumerate(steps) if step[0] == "rocm_driver"]
    image = [i for i, step in enumerate(steps) if step[0] == "sglang_image"]
    waited = [i for i, step in enumerate(steps) if step[:2] == ("model_weights", "wait")]
    assert started < driver[0]
    assert image[-1] < waited[0]
    rocm_image = derived_image("mi355x")
    assert (
        lab.pool.ssh("mi355x", f"docker image inspect {rocm_image} >/dev/null && echo ok").stdout.strip()
        == "ok"
    )
    assert_no_change(lab.play(hosts, "all", extravars=SMALL_SIZES))


def test_a_router_host_gets_docker_and_the_image_but_no_gpu_stack_or_weights(lab: Lab) -> None:
    # an H200 stack's router on a host of its own, with the facts flashfleet.inventory gives it
    first = lab.play(["router"], "all", facts_override={"router": ROUTER_HOST}, extravars=SMALL_SIZES)
    assert first.ok, first.explain()
    roles = {p.role for p in first.progress if p.host == "router" and p.role}
    assert {"preflight", "container_runtime", "sglang_image"} <= roles, roles
    assert not roles & {"nvidia_driver", "rocm_driver"}, roles
    packages = lab.pool.ssh("router", "dpkg-query -W -f '${Package}\\n'").stdout.split()
    assert "docker-ce" in packages
    assert not [p for p in packages if p.startswith(("nvidia", "libnvidia", "cuda"))], packages
    daemon = json.loads(lab.pool.ssh("router", "cat /etc/docker/daemon.json").stdout)
    assert "nvidia" not in daemon.get("runtimes", {}), daemon
    assert "default-runtime" not in daemon, daemon
    image = derived_image("h200")  # the router runs in the stack's image
    assert (
        lab.pool.ssh("router", f"docker image inspect {image} >/dev/null && echo ok").stdout.strip() == "ok"
    )
    weights = lab.pool.ssh("router", "find /var/lib/flashfleet/hf -type f 2>/dev/null | wc -l").stdout.strip()
    assert weights == "0", "a router host downloaded weights"
    assert_no_change(
        lab.play(["router"], "all", facts_override={"router": ROUTER_HOST}, extravars=SMALL_SIZES)
    )
