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
    rocm_image = derived_image("mi355x")
    assert (
        lab.pool.ssh("mi355x", f"docker image inspect {rocm_image} >/dev/null && echo ok").stdout.strip()
        == "ok"
    )
    assert_no_change(lab.play(hosts, "all", extravars=SMALL_SIZES))
