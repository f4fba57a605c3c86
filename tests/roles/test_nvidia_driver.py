"""nvidia_driver on real hosts: pinned driver + fabric manager on H200, IMEX on a GB300 pair,
a Deep Learning AMI's running driver kept, check mode honest, second runs change nothing."""

from __future__ import annotations

import pytest

from .conftest import Lab, Run, assert_no_change, assert_same_plan, host_state
from .test_preflight import SMALL_SIZES

PLANS: dict[str, Run] = {}


def dpkg(lab: Lab, host: str, package: str) -> str:
    return lab.pool.ssh(host, f"dpkg-query -W -f '${{Version}}' {package}").stdout


def test_preflight_on_a_node_without_driver_leaves_the_gpus_to_this_role(lab: Lab) -> None:
    run = lab.play(["h200"], "preflight", extravars=SMALL_SIZES)
    assert run.ok, run.explain()
    statuses = {p.task: p.status for p in run.progress if p.host == "h200"}
    assert statuses["no driver yet, the driver role verifies the GPUs"] == "ok"
    assert statuses["model and count match the stack"] == "skipped"


def test_check_mode_on_a_fresh_h200_changes_nothing(lab: Lab) -> None:
    before = host_state(lab, "h200")
    run = lab.play(["h200"], "nvidia_driver", check=True)
    assert run.ok, run.explain()
    assert run.changed("h200") > 0  # it does announce work
    assert host_state(lab, "h200") == before
    PLANS["h200"] = run


def test_h200_converges_to_the_pinned_driver_and_fabric_manager(lab: Lab) -> None:
    run = lab.play(["h200"], "nvidia_driver")
    assert run.ok, run.explain()
    # the repository also offers 595.99.01: the pin keeps every package at the profile's version
    assert dpkg(lab, "h200", "nvidia-driver-595-open") == "595.91.07-1"
    assert dpkg(lab, "h200", "nvidia-fabricmanager-595") == "595.91.07-1"
    for unit in ("nvidia-fabricmanager", "nvidia-persistenced"):
        assert lab.pool.ssh("h200", f"systemctl is-active {unit}").stdout.strip() == "active"
    assert run.statuses("h200")["nvidia_driver:the pinned driver runs and sees the expected GPUs"] == "ok"
    assert_same_plan(PLANS["h200"], run, "h200")


def test_h200_second_run_and_check_mode_change_nothing(lab: Lab) -> None:
    again = lab.play(["h200"], "nvidia_driver")
    assert_no_change(again)
    check = lab.play(["h200"], "nvidia_driver", check=True)
    assert_no_change(check)


def test_the_driver_is_installed_only_as_the_stack_s_lock_holds_it(lab: Lab) -> None:
    """`flashfleet lock`'s resolution of the lab's CUDA repository (the one these Debian 12 hosts'
    sources name), handed to the node as the inventory hands it: what apt would install is checked
    against it before anything is installed."""
    from flashfleet.apt_index import resolve

    index = f"{lab.base_url}/cuda/repos/debian12/x86_64/"
    pins = {"nvidia-driver-595-open": "595.91.07-*", "nvidia-fabricmanager-595": "595.91.07-*"}
    locked = {n: d.model_dump() for n, d in resolve([index], list(pins), pins)[index].items()}
    assert {n: d["version"] for n, d in locked.items()} == dict.fromkeys(pins, "595.91.07-1")

    def play(lock: dict[str, object]) -> Run:
        # the fabric manager gone again: the install (and its check) has something to do
        lab.pool.ssh("h200", "apt-get purge -y -qq nvidia-fabricmanager-595")
        facts = {"flashfleet_apt_lock": {"nvidia_driver": lock}}
        return lab.play(["h200"], "nvidia_driver", facts_override={"h200": facts})

    run = play({index: locked})
    assert run.ok, run.explain()
    assert run.statuses("h200")["apt_lock:the packages are the locked ones"] == "ok"
    assert dpkg(lab, "h200", "nvidia-fabricmanager-595") == "595.91.07-1"

    # the repository's index lists other bytes than the lock: stopped before apt installs, named
    other = {**locked, "nvidia-fabricmanager-595": {**locked["nvidia-fabricmanager-595"], "sha256": "0" * 64}}
    refused = play({index: other})
    assert not refused.ok
    [failure] = refused.result.failures
    assert failure.task == "the packages are the locked ones", failure
    assert "nvidia-fabricmanager-595 595.91.07-1: the repository lists sha256 " in failure.message
    assert f"where the lock has {'0' * 64}" in failure.message
    absent = lab.pool.ssh("h200", "dpkg-query -W nvidia-fabricmanager-595 2>/dev/null || echo absent").stdout
    assert absent.strip() == "absent"  # nothing installed
    # a dependency apt would take from the repository that the lock does not hold is named too
    partial = {"nvidia-driver-595-open": locked["nvidia-driver-595-open"]}
    refused = play({index: partial})
    assert (
        "nvidia-fabricmanager-595 595.91.07-1: apt would install it from"
        in refused.result.failures[0].message
    )
    # a lock of other distributions only: this node's is not in it
    elsewhere = play({index.replace("debian12", "ubuntu2404"): locked})
    assert "has no entry for " + index in elsewhere.result.failures[0].message
    # a lock older than the catalog's driver: named, not installed at the lock's version
    older = {n: {**d, "version": "595.80.01-1"} for n, d in locked.items()}
    stale = play({index: older})
    assert "the lock has 595.80.01-1 where the role pins 595.91.07-*" in stale.result.failures[0].message

    restored = play({index: locked})
    assert restored.ok, restored.explain()


def test_deep_learning_ami_keeps_its_running_driver(lab: Lab) -> None:
    run = lab.play(["dlami"], "nvidia_driver")
    assert run.ok, run.explain()
    # only the fabric manager was missing; the AMI's driver was not reinstalled
    log = lab.pool.ssh("dlami", "grep -E ' (install|upgrade) ' /var/log/dpkg.log").stdout
    assert log.count("install nvidia-driver-595-open") == 1, log
    assert "install nvidia-fabricmanager-595" in log
    assert lab.play(["dlami"], "nvidia_driver").changed() == 0


def test_gb300_pair_runs_imex_with_one_node_list(lab: Lab) -> None:
    pair = ["gb300a", "gb300b"]
    run = lab.play(pair, "nvidia_driver")
    assert run.ok, run.explain()
    addresses = [lab.pool.hosts[h].address for h in pair]
    for host in pair:
        assert dpkg(lab, host, "nvidia-driver-595-open") == "595.91.07-1"  # open modules
        nodes = lab.pool.ssh(host, "cat /etc/nvidia-imex/nodes_config.cfg").stdout.split()
        assert nodes == addresses
        status = lab.pool.ssh(host, "nvidia-imex-ctl -N").stdout
        assert "Domain State: UP" in status
        assert status.count(" - READY ") == 2
    assert lab.play(pair, "nvidia_driver").changed() == 0


def test_imex_node_list_is_not_changed_under_a_running_daemon(lab: Lab) -> None:
    run = lab.play(["gb300a"], "nvidia_driver")  # an inventory with one node fewer
    assert not run.ok
    [failure] = run.result.failures
    assert "nvidia-imex runs on gb300a with a different node list" in failure.message
    assert "nvidia_driver_imex_reconfigure=true" in failure.message
    nodes = lab.pool.ssh("gb300a", "cat /etc/nvidia-imex/nodes_config.cfg").stdout.split()
    assert len(nodes) == 2  # untouched


def test_imex_reconfigure_stops_rewrites_and_starts(lab: Lab) -> None:
    only_a = lab.play(["gb300a"], "nvidia_driver", extravars={"nvidia_driver_imex_reconfigure": True})
    assert only_a.ok, only_a.explain()
    status = lab.pool.ssh("gb300a", "nvidia-imex-ctl -N").stdout
    assert status.count(" - READY ") == 1
    assert "Domain State: UP" in status
    both = lab.play(["gb300a", "gb300b"], "nvidia_driver",
                    extravars={"nvidia_driver_imex_reconfigure": True})  # fmt: skip
    assert both.ok, both.explain()
    assert lab.pool.ssh("gb300a", "nvidia-imex-ctl -N").stdout.count(" - READY ") == 2


def test_an_imex_daemon_that_dies_is_reported_with_its_log(lab: Lab) -> None:
    pair = ["gb300a", "gb300b"]
    reconfigure = {"nvidia_driver_imex_reconfigure": True}
    # the unit starts; its daemon says why it cannot run and exits
    dying = "#!/bin/sh\necho 'IMEX: cannot bind port 50000' >&2\nexit 1\n"
    lab.pool.ssh(
        "gb300a",
        f"cp -p /usr/bin/nvidia-imex /root/imex.keep && printf '%s' \"{dying}\" > /usr/bin/nvidia-imex",
    )
    try:
        run = lab.play(
            pair, "nvidia_driver", extravars={**reconfigure, "nvidia_driver_imex_ready_timeout": 4}
        )
    finally:
        lab.pool.ssh("gb300a", "mv /root/imex.keep /usr/bin/nvidia-imex")
    assert not run.ok
    assert {f.host for f in run.result.failures} == {"gb300a"}, run.explain()
    [failure] = [f for f in run.result.failures if f.task == "IMEX domain is up with every node ready"]
    assert "the IMEX domain is not UP with 2 nodes READY after 4 s" in failure.message
    assert "Connection to IMEX daemon failed" in failure.message  # what nvidia-imex-ctl said
    assert "IMEX: cannot bind port 50000" in failure.message  # what the daemon said, from its log
    again = lab.play(pair, "nvidia_driver", extravars=reconfigure)
    assert again.ok, again.explain()


@pytest.mark.parametrize(
    ("extravars", "message"),
    [
        ({"nvidia_driver_open_kernel_modules": False}, "GB300 needs open kernel modules"),
        ({"nvidia_driver_version": "580.95.05"}, "version 580.95.05 must be on branch 595"),
    ],
)
def test_inconsistent_driver_inputs_are_refused(lab: Lab, extravars: dict[str, object], message: str) -> None:
    run = lab.play(["gb300b"], "nvidia_driver", extravars=extravars)
    assert not run.ok
    assert message in run.result.failures[0].message
