"""The whole of playbooks/prepare.yml on an NVIDIA and an AMD node together: every play picks
its hosts by inventory group, and a second run of everything changes nothing."""

from __future__ import annotations

from .conftest import Lab, assert_no_change
from .hardware import derived_image
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
