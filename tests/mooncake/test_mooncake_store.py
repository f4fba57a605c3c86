"""The mooncake role against real systemd test hosts: a real mooncake_master (non-CUDA wheel,
TCP) on node 0, and store clients on the other node that use only the config the role rendered."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # tests/ (no __init__ here: `mooncake` is the wheel)

from serve.lab import ServeLab, make_stack, serve_lab

from flashfleet.recipes.layouts import MOONCAKE_CONFIG_PATH

HOSTS = ["mc0", "mc1"]
CHECK = "/opt/flashfleet/mooncake/venv/bin/python /opt/flashfleet/mooncake/store_check.py"


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[ServeLab, dict]]:
    with serve_lab(HOSTS, engine=False) as lab:  # the master and stores are units: no container
        addresses = [lab.address(h) for h in HOSTS]
        bringup = make_stack(
            "mc", "unified", addresses, options={"hicache": "l1l2l3", "hicache_size": 10},
            mooncake={"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 1},
        )  # fmt: skip
        inventory = lab.inventory((bringup, HOSTS))
        first = lab.run("mooncake.yml", inventory)
        assert first.ok, lab.explain(first)
        yield lab, {"inventory": inventory, "first": first}


def test_master_runs_only_on_the_designated_node(store: tuple[ServeLab, dict]) -> None:
    lab, _ = store
    assert lab.ssh("mc0", "systemctl is-active mooncake-master.service").strip() == "active"
    assert lab.ssh("mc0", "systemctl is-enabled mooncake-master.service").strip() == "enabled"
    assert "mooncake-master" not in lab.ssh("mc1", "ls /etc/systemd/system")


def test_rendered_config_names_the_master_and_this_node(store: tuple[ServeLab, dict]) -> None:
    lab, _ = store
    master = lab.address("mc0")
    for host in HOSTS:
        config = json.loads(lab.ssh(host, f"cat {MOONCAKE_CONFIG_PATH}"))
        assert config["master_server_address"] == f"{master}:50051"
        assert config["metadata_server"] == f"http://{master}:8080/metadata"
        assert config["protocol"] == "tcp"
        assert config["local_hostname"] == lab.address(host)
        assert config["global_segment_size"] == 1 << 30
        assert lab.ssh(host, f"stat -c %a {MOONCAKE_CONFIG_PATH}").strip() == "644"


def test_role_checked_the_store_from_every_node(store: tuple[ServeLab, dict]) -> None:
    _, state = store
    events = [json.loads(line) for line in state["first"].events_log.read_text().splitlines()]
    checks = {
        e["event_data"]["host"]: e["event_data"]["res"]["msg"]
        for e in events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == "Check | result"
    }
    assert set(checks) == {"mc-node-0", "mc-node-1"}
    assert all(json.loads(msg)["ok"] for msg in checks.values()), checks


def test_kv_block_put_on_one_host_is_read_on_the_other(store: tuple[ServeLab, dict]) -> None:
    lab, _ = store
    key = f"kv-block/layer-0/page-{time.time_ns()}"
    lab.ssh(
        "mc1", f"nohup {CHECK} {MOONCAKE_CONFIG_PATH} --put {key} --hold 60 >/tmp/put.json 2>/tmp/put.log &"
    )
    put: dict = {}
    for _ in range(60):
        out = lab.ssh("mc1", "cat /tmp/put.json", check=False).strip()
        if out:
            put = json.loads(out)
            break
        time.sleep(0.5)
    assert put.get("ok"), lab.ssh("mc1", "tail -5 /tmp/put.log", check=False)
    segments = lab.ssh(
        "mc0",
        'python3 -c "import urllib.request;print(urllib.request.urlopen('
        "'http://127.0.0.1:9003/get_all_segments').read().decode())\"",
    )
    assert any(s.startswith(lab.address("mc1") + ":") for s in segments.split()), segments
    got = json.loads(lab.ssh("mc0", f"{CHECK} {MOONCAKE_CONFIG_PATH} --get {key}").strip().splitlines()[-1])
    assert got == {**got, "ok": True, "match": True, "bytes": 4 * 1024 * 1024}, got


def test_second_run_changes_nothing(store: tuple[ServeLab, dict]) -> None:
    lab, state = store
    again = lab.run("mooncake.yml", state["inventory"])
    assert again.ok, lab.explain(again)
    assert again.count("changed") == 0, [str(p) for p in lab.progress if p.status == "changed"]
