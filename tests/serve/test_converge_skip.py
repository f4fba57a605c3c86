"""The converge record on a real systemd test host: a re-run that changes nothing skips every
role, a hand-edited unit or a stopped service is still caught (drift), a changed input re-runs
only the roles that read it (and those after them), and teardown removes the record.

site.yml runs with the tags of tests/serve (Mooncake, serve, verify; the prepare roles need the
GPU and apt fixtures of tests/roles) and, unlike the other tests, without `reconverge`: the path
`flashfleet configure` and `pulumi up` take."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from flashfleet.bringup.playbook_run import RunResult

from .lab import ServeLab, install_fake_docker, make_stack, serve_lab

HOST = "cv"
TAGS = "mooncake,serve,verify"
FAST = {"sglang_serve_ready_timeout_s": 60, "sglang_serve_ready_poll_s": 1}
RECORD = "/var/lib/flashfleet/converge.json"


@pytest.fixture(scope="module")
def lab() -> Iterator[dict[str, Any]]:
    with serve_lab([HOST]) as opened:
        install_fake_docker(opened, HOST)
        (opened.pool.hosts[HOST].root / "etc/flashfleet-test/standin.json").write_text(
            json.dumps({"load_seconds": 1, "image_mode": "pixels"})
        )
        stack = make_stack(
            "cv", "unified", [opened.address(HOST)],
            options={"hicache": "l1l2l3", "hicache_size": 10},
            mooncake={"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 1},
        )  # fmt: skip
        inventory = opened.inventory((stack, [HOST]))
        first = opened.run("site.yml", inventory, tags=TAGS, extravars=FAST, reconverge=False)
        assert first.ok, opened.explain(first)
        yield {"lab": opened, "inventory": inventory, "first": first}


def run(state: dict[str, Any], inventory: dict[str, Any] | None = None) -> RunResult:
    lab: ServeLab = state["lab"]
    result = lab.run("site.yml", inventory or state["inventory"], tags=TAGS, extravars=FAST, reconverge=False)
    assert result.ok, lab.explain(result)
    return result


def roles_ran(lab: ServeLab) -> set[str]:
    """Roles that ran at least one task that was not skipped."""
    return {p.role for p in lab.progress if p.role and p.role != "converge" and p.status != "skipped"}


def node(state: dict[str, Any]) -> str:
    return next(iter(state["inventory"]["all"]["hosts"]))


def test_first_run_records_each_role_root_only(lab: dict[str, Any]) -> None:
    out = lab["lab"].ssh(HOST, f"stat -c '%a %U' {RECORD} && cat {RECORD}")
    mode, _, body = out.partition("\n")
    assert mode == "600 root"
    record = json.loads(body)
    assert {"mooncake", "sglang_serve", "verify"} <= set(record)
    # every entry carries what its drift check reads back: the serving unit among them
    units = record["sglang_serve"]["snapshot"]["units"]
    assert units
    assert all("ActiveState=active" in u for u in units.values()), units


def test_rerun_skips_every_role_and_changes_nothing(lab: dict[str, Any]) -> None:
    again = run(lab)
    assert again.count("changed") == 0
    assert roles_ran(lab["lab"]) == set(), [str(p) for p in lab["lab"].progress if p.status != "skipped"]
    # the skip path runs one command on the node: the converge check
    commands = [p for p in lab["lab"].progress if p.status == "ok" and p.role == "converge"]
    assert [p.task for p in commands if "what changed" in p.task], commands


def test_a_hand_edited_unit_is_caught_and_restored(lab: dict[str, Any]) -> None:
    state_lab: ServeLab = lab["lab"]
    unit = lab["inventory"]["all"]["hosts"][node(lab)]["flashfleet_processes"][0]["container_name"]
    path = f"/etc/systemd/system/{unit}.service"
    before = state_lab.ssh(HOST, f"cat {path}")
    state_lab.ssh(HOST, f"sed -i 's/^Restart=.*/Restart=no/' {path} && systemctl daemon-reload")
    assert state_lab.ssh(HOST, f"cat {path}") != before
    fixed = run(lab)
    assert state_lab.ssh(HOST, f"cat {path}") == before
    assert fixed.count("changed") > 0
    ran = roles_ran(state_lab)
    assert {"sglang_serve", "verify"} <= ran, ran
    assert "mooncake" not in ran, ran
    # and the run after the repair skips again
    run(lab)
    assert roles_ran(state_lab) == set()


def test_a_stopped_service_is_caught_and_started(lab: dict[str, Any]) -> None:
    state_lab: ServeLab = lab["lab"]
    state_lab.ssh(HOST, "systemctl stop mooncake-master.service")
    run(lab)
    assert state_lab.ssh(HOST, "systemctl is-active mooncake-master.service").strip() == "active"
    # the master came first in the chain: everything after it ran as well
    assert {"mooncake", "sglang_serve", "verify"} <= roles_ran(state_lab)


def test_a_changed_input_reruns_only_the_roles_that_read_it(lab: dict[str, Any]) -> None:
    inventory = copy.deepcopy(lab["inventory"])
    facts = inventory["all"]["hosts"][node(lab)]
    assert facts["flashfleet_tool_calls"] is True
    facts["flashfleet_tool_calls"] = False  # only the verify play reads it
    run(lab, inventory)
    assert roles_ran(lab["lab"]) == {"verify"}
    run(lab, inventory)
    assert roles_ran(lab["lab"]) == set()


def test_reconverge_runs_every_role(lab: dict[str, Any]) -> None:
    state_lab: ServeLab = lab["lab"]
    result = state_lab.run("site.yml", lab["inventory"], tags=TAGS, extravars=FAST, reconverge=True)
    assert result.ok, state_lab.explain(result)
    assert {"mooncake", "sglang_serve", "verify"} <= roles_ran(state_lab)
    assert result.count("changed") == 0  # the roles change nothing; the record is bookkeeping


def test_teardown_removes_the_record(lab: dict[str, Any]) -> None:
    state_lab: ServeLab = lab["lab"]
    down = state_lab.run("teardown.yml", lab["inventory"])
    assert down.ok, state_lab.explain(down)
    assert state_lab.ssh(HOST, f"test -e {RECORD} && echo left || echo gone").strip() == "gone"
