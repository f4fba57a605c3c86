"""Weights fetched once per stack, on real hosts against the stand-in Hub (which counts the bytes
it serves per file), with the real `hf download` client on the seed: three nodes download each
file from the Hub once, every node ends with the locked bytes, a corrupted copy on the seed is
refused by its peers and fetched again from the Hub, and the weights phase's wall time for one
host and for four is printed side by side. The job alone: test_weights_fanout_job.py."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from hosts.harness import HostSpec
from hosts.hub import Repo

from flashfleet.cli.lock import resolve_repo

from .conftest import Lab, Run, assert_no_change, open_lab
from .hardware import H200, NVIDIA_DEVICES

HOSTS = ["w1", "w2", "w3", "w4"]
REPO = "fanout-test/GLM-5.3-Flash"
SHARDS = {f"model-0000{i}-of-00002.safetensors": bytes([i]) * 4_000_000 for i in (1, 2)}
FILES = {"config.json": b'{"model_type": "glm5_next"}', **SHARDS}
STORAGE = "hub/models--fanout-test--GLM-5.3-Flash"


@pytest.fixture(scope="module")
def fleet() -> Iterator[Lab]:
    specs = [HostSpec(h, H200, NVIDIA_DEVICES) for h in HOSTS]
    with open_lab(specs, groups=dict.fromkeys(HOSTS, "h200")) as lab:
        lab.hub.repos[REPO] = Repo(dict(FILES))
        yield lab


def nodes(lab: Lab, hosts: list[str], cache: str, **fanout: Any) -> dict[str, dict[str, Any]]:
    """The inventory's variables of a stack of `hosts`: the first seeds, the others are its peers
    (flashfleet.inventory's decision); one host alone asks the Hub on its own."""
    lock = {REPO: resolve_repo(REPO, "main", lab.hub_url).model_dump(mode="json")}
    seed = hosts[0]
    common = {"seed": seed, "seed_address": lab.pool.hosts[seed].address, "port": 18470, "wait_s": 300}
    out = {}
    for h in hosts:
        part: dict[str, Any] | None = None
        if len(hosts) > 1:
            part = {"role": "seed", "peers": hosts[1:], **common} if h == seed else {"role": "peer", **common}
            part.update(fanout)
        out[h] = {"flashfleet_model": REPO, "flashfleet_model_cache_dir": cache, "flashfleet_weights_lock": lock,
                  "flashfleet_weights_fanout": part}  # fmt: skip
    return out


def served(lab: Lab) -> dict[str, int]:
    return {name: lab.hub.served.get(f"{REPO}/{name}", 0) for name in FILES}


def locked_bytes(lab: Lab, host: str, cache: str) -> dict[str, str]:
    """sha256 of each file of the node's snapshot of the locked commit."""
    commit = resolve_repo(REPO, "main", lab.hub_url).commit
    out = lab.pool.ssh(host, f"cd {cache}/{STORAGE}/snapshots/{commit} && sha256sum -- *").stdout
    return {line.split()[1]: line.split()[0] for line in out.splitlines()}


def said(run: Run, host: str) -> str:
    """What the wait reported on `host`: what the job downloaded, and its fan-out notes."""
    for line in run.result.events_log.read_text().splitlines():
        event = json.loads(line)
        data = event.get("event_data", {})
        if data.get("host") == host and data.get("task") == "Wait | what the job installed and downloaded":
            msg = data.get("res", {}).get("msg")
            if msg:
                return str(msg)
    return ""


WANT = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}


def job_span(run: Run) -> float:
    """Seconds from the first node's job start to the last node's wait ending (its poll included):
    the downloads and the fan-out, without the fixed cost of the plays around them, which grows
    with the hosts this machine's two cores run at once."""
    events = [json.loads(line) for line in run.result.events_log.read_text().splitlines()]

    def ends(task: str) -> list[float]:
        return [
            datetime.fromisoformat(e["created"]).timestamp()
            for e in events
            if e["event"] == "runner_on_ok" and e.get("event_data", {}).get("task") == task
        ]

    return max(ends("Wait | the background job")) - min(
        ends("Start | client and downloads, one background job")
    )


def test_three_nodes_download_each_file_from_the_hub_once(fleet: Lab) -> None:
    cache = "/var/lib/flashfleet/hf-fanout"
    stack = nodes(fleet, HOSTS[:3], cache)
    before = served(fleet)
    run = fleet.play(HOSTS[:3], "model_weights", facts_override=stack)
    assert run.ok, run.explain()
    got = {n: served(fleet)[n] - before[n] for n in FILES}
    assert got == {n: len(d) for n, d in FILES.items()}, got  # today: three times each
    for host in HOSTS[:3]:
        assert locked_bytes(fleet, host, cache) == WANT, host
    # the peers installed no download client: nothing was left for the Hub
    venvs = [
        fleet.pool.ssh(h, "test -e /opt/flashfleet/hf-cli || echo none").stdout.strip() for h in HOSTS[1:3]
    ]
    assert venvs == ["none", "none"]
    asked = len(fleet.hub.requests)
    assert_no_change(fleet.play(HOSTS[:3], "model_weights", facts_override=stack))
    assert len(fleet.hub.requests) == asked


def test_a_corrupted_copy_on_the_seed_is_refused_and_fetched_again(fleet: Lab) -> None:
    cache = "/var/lib/flashfleet/hf-rotten"
    seed, peers = HOSTS[0], HOSTS[1:3]
    alone = fleet.play([seed], "model_weights", facts_override=nodes(fleet, [seed], cache))
    assert alone.ok, alone.explain()
    # the seed's cached shard rots on disk (same size, other bytes): its marker still says complete
    shard = "model-00002-of-00002.safetensors"
    commit = resolve_repo(REPO, "main", fleet.hub_url).commit
    fleet.pool.ssh(
        seed, f"p=$(readlink -f {cache}/{STORAGE}/snapshots/{commit}/{shard}); "
        f"head -c {len(FILES[shard])} /dev/zero > $p.tmp && cat $p.tmp > $p && rm $p.tmp"
    )  # fmt: skip
    before = served(fleet)
    run = fleet.play([seed, *peers], "model_weights", facts_override=nodes(fleet, [seed, *peers], cache))
    assert run.ok, run.explain()
    got = {n: served(fleet)[n] - before[n] for n in FILES}
    # each peer refused the seed's shard and took it from the Hub; the rest came from the seed
    assert got == {"config.json": 0, "model-00001-of-00002.safetensors": 0, shard: 2 * len(FILES[shard])}, got
    for host in peers:
        assert locked_bytes(fleet, host, cache) == WANT, host
    for host in peers:
        assert f"{shard} refused: sha256 " in said(run, host), said(run, host)


def test_a_peer_that_cannot_reach_its_seed_takes_the_hub_and_says_so(fleet: Lab) -> None:
    cache = "/var/lib/flashfleet/hf-alone"
    # the seed is not in the play (it never serves): the peer tries for wait_s, then the Hub
    stack = nodes(fleet, [HOSTS[0], HOSTS[3]], cache, wait_s=3)
    run = fleet.play([HOSTS[3]], "model_weights", facts_override={HOSTS[3]: stack[HOSTS[3]]})
    assert run.ok, run.explain()
    assert locked_bytes(fleet, HOSTS[3], cache) == WANT
    assert "from the Hub (the seed " in said(run, HOSTS[3]), said(run, HOSTS[3])
    assert "did not answer for 3 s" in said(run, HOSTS[3])


def test_the_weights_phase_for_one_host_and_for_four(fleet: Lab) -> None:
    """Printed side by side: fresh caches and no client installed yet, the real client; 4 hosts with
    the fan-out, and 4 hosts each asking the Hub (as before). Asserts what the Hub served; the
    times only print."""
    rows = []
    for label, hosts, fan in (("1 host", HOSTS[:1], True), ("4 hosts, fan-out", HOSTS, True),
                              ("4 hosts, each from the Hub", HOSTS, False)):  # fmt: skip
        cache = f"/var/lib/flashfleet/hf-time{len(rows)}"
        stack = nodes(fleet, hosts, cache)
        if not fan:
            stack = {h: {**v, "flashfleet_weights_fanout": None} for h, v in stack.items()}
        # every row from nodes as a first bring-up finds them: no download client yet
        for h in HOSTS:
            fleet.pool.ssh(h, "rm -rf /opt/flashfleet/hf-cli")
        before = sum(fleet.hub.served.values())
        start = time.monotonic()
        run = fleet.play(hosts, "model_weights", facts_override=stack)
        took = time.monotonic() - start
        assert run.ok, run.explain()
        rows.append((label, took, job_span(run), sum(fleet.hub.served.values()) - before))
    size = sum(len(d) for d in FILES.values())
    assert [r[3] for r in rows] == [size, size, 4 * size]
    print("\nweights phase (model_weights tags, real client, stand-in Hub): the play, and its jobs alone")
    for label, took, job, sent in rows:
        print(
            f"  {label:<28} {took:6.1f} s  x{took / rows[0][1]:.2f}   jobs {job:5.1f} s  x{job / rows[0][2]:.2f}"
            f"   Hub sent {sent / size:.0f} x the checkpoint"
        )
