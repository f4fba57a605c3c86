"""rocm_driver on a real host: amdgpu-dkms and ROCm 7 from AMD's (local) repositories."""

from __future__ import annotations

from typing import Any

from hosts.aptindex import role_locks_of
from hosts.aptrepo import Deb

from .conftest import Lab, Run, assert_no_change, assert_same_plan, host_state


def test_mi355x_check_mode_then_converge_then_nothing_left(lab: Lab) -> None:
    before = host_state(lab, "mi355x")
    check = lab.play(["mi355x"], "rocm_driver", check=True)
    assert check.ok, check.explain()
    assert host_state(lab, "mi355x") == before

    run = lab.play(["mi355x"], "rocm_driver")
    assert run.ok, run.explain()
    assert_same_plan(check, run, "mi355x")
    versions = lab.pool.ssh("mi355x", "dpkg-query -W amdgpu-dkms rocm").stdout
    assert "amdgpu-dkms\t1:6.14.14.30100200" in versions
    assert "rocm\t7.0.2" in versions
    # AMD's pin applies to packages whose Release says Origin: repo.radeon.com
    policy = lab.pool.ssh("mi355x", "apt-cache policy rocm").stdout
    assert " 600 " in policy, policy
    verified = run.statuses("mi355x")["rocm_driver:the driver runs and sees the expected GPUs"]
    assert verified == "ok"

    again = lab.play(["mi355x"], "rocm_driver")
    assert_no_change(again)


def test_gpu_count_mismatch_after_install_names_the_numbers(lab: Lab) -> None:
    run = lab.play(["mi355x"], "rocm_driver", facts_override={"mi355x": {"flashfleet_gpu_count": 4}})
    assert not run.ok
    message = run.result.failures[0].message
    assert "expected 4 x MI355X" in message
    assert "reports 8: AMD Instinct MI355X" in message


def test_rocm_6_is_refused_for_gfx950(lab: Lab) -> None:
    run = lab.play(["mi355x"], "rocm_driver", extravars={"rocm_driver_rocm_version": "6.4.1"})
    assert not run.ok
    assert "MI355X (gfx950) needs ROCm 7.x, got 6.4.1" in run.result.failures[0].message


def test_amdgpu_and_rocm_install_only_as_the_stack_s_lock_holds_them(lab: Lab) -> None:
    """`flashfleet lock`'s resolution of the lab's two AMD repositories, read together as the node
    reads them, handed to the node as the inventory hands it."""
    lock = role_locks_of(lab.repo_vars(), "mi355x")["rocm_driver"]
    rocm = f"{lab.base_url}/rocm/apt/7.0.2/dists/jammy/main/binary-amd64/"
    assert {n: d["version"] for n, d in lock[rocm].items()} == {"amd-smi-lib": "7.0.2.70002-56~22.04",
                                                                "rocm": "7.0.2.70002-56~22.04"}  # fmt: skip

    def play(held: dict[str, Any]) -> Run:
        lab.pool.ssh("mi355x", "dpkg --purge rocm")
        return lab.play(
            ["mi355x"],
            "rocm_driver",
            facts_override={"mi355x": {"flashfleet_apt_lock": {"rocm_driver": held}}},
        )

    run = play(lock)
    assert run.ok, run.explain()
    assert run.statuses("mi355x")["apt_lock:the packages are the locked ones"] == "ok"
    assert "rocm\t7.0.2.70002-56~22.04" in lab.pool.ssh("mi355x", "dpkg-query -W rocm").stdout
    # AMD publishes a newer ROCm library after the lock: apt would take it as rocm's dependency,
    # so it is asked for at the lock's version, and that is what the node holds
    newer = lab.repo.publish(
        "rocm/apt/7.0.2",
        Deb("amd-smi-lib", "7.0.2.70002-57~22.04", {"/opt/rocm-7.0.2/bin/amd-smi": "amd-smi"}),
    )
    try:
        lab.pool.ssh("mi355x", "dpkg --purge rocm amd-smi-lib && apt-get update -qq")
        moved = play(lock)
        assert moved.ok, moved.explain()
        held = lab.pool.ssh("mi355x", "dpkg-query -W amd-smi-lib").stdout
        assert held.strip() == "amd-smi-lib\t7.0.2.70002-56~22.04", held
    finally:
        lab.repo.withdraw("rocm/apt/7.0.2", newer)
        lab.pool.ssh("mi355x", "apt-get update -qq")
    # a dependency the lock does not hold: named, nothing installed
    partial = {**lock, rocm: {"rocm": lock[rocm]["rocm"]}}
    lab.pool.ssh("mi355x", "dpkg --purge rocm amd-smi-lib")
    refused = play(partial)
    assert (
        "amd-smi-lib 7.0.2.70002-56~22.04: apt would install it from the repository; the lock does not hold it"
        in (refused.result.failures[0].message)
    )
    assert lab.pool.ssh("mi355x", "dpkg-query -W rocm 2>/dev/null || echo absent").stdout.strip() == "absent"
    assert play(lock).ok
