"""Clusters on real systemd test hosts behind the real router (SMG's `smg launch`, from its PyPI
wheel in the stand-in image, with the timeouts and health checks the recipe renders), with
stand-in workers, all containers on each host's real Docker engine (tests/serve/lab.py):
replicas under each policy, a rolling update under load, a dead replica, and PD across nodes
(1P2D) in the router's PD mode.

One scenario per module: three hosts boot once and the stacks follow each other on them, as a
user would change one stack file and run the bring-up again."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bench.servers import GENERATION_TOKENS, PROMPT_TOKENS, REQUESTS, parse_counters
from flashfleet.cli import main
from flashfleet.recipes import render

from .lab import ServeLab, make_stack, serve_lab
from .test_site import containers, set_knobs

HOSTS = ["c0", "c1", "c2"]
SERVE = "serve,verify"
# Short waits for the stand-ins; the rolling update's drain and readiness use the same poll.
FAST = {"sglang_serve_ready_timeout_s": 120, "sglang_serve_ready_poll_s": 1}
LOAD_SECONDS = 2
CLIENTS = 8
PACE_S = 0.05  # between one client's requests: at most 160 a second in all
# SMG routes by model name: a request names the model the workers serve (a name no worker serves
# is answered 404, where SGLang's own server and sglang-router ignore it)
MODEL = render("h200", "high-throughput").model


@pytest.fixture(scope="module")
def lab() -> Iterator[ServeLab]:
    with serve_lab(HOSTS) as lab:
        for host in HOSTS:
            set_knobs(lab, host, load_seconds=LOAD_SECONDS)
        yield lab


def replicas(lab: ServeLab, policy: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    a = lab.address
    stack = make_stack("rep", "unified", [a("c0"), a("c1")], strategy="high-throughput", options=options,
                       cluster={"replicas": 2, "router": {"policy": policy}})  # fmt: skip
    return lab.inventory((stack, ["c0", "c1"]))


def router_url(lab: ServeLab) -> str:
    return f"http://{lab.address('c0')}:30000"


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def chat(url: str, text: str, timeout: float = 30) -> int:
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 4}
    ).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return parse_counters(resp.read().decode(), [REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS])


def worker_urls(lab: ServeLab, *hosts: str, port: int = 31000) -> list[str]:
    return [f"http://{lab.address(h)}:{port}" for h in hosts]


def served(
    lab: ServeLab, urls: list[str], before: dict[str, dict[str, float]], metric: str = REQUESTS
) -> list[float]:
    return [counters(u)[metric] - before[u][metric] for u in urls]


def _fingerprint(raw: bytes) -> str | None:
    """The answer's system_fingerprint (None where it has none, or is not JSON)."""
    try:
        found = json.loads(raw).get("system_fingerprint")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


class Load:
    """CLIENTS clients sending chat requests through the router until stopped; each result is
    (when it ended, its status, the answer's system_fingerprint: which servers' versions served it).

    Each client keeps one connection open (a new one only after a failure) and paces itself:
    a fresh connection per request would leave one socket in TIME_WAIT each, and a long update
    would run the client out of local ports, failing requests the router never saw."""

    def __init__(self, url: str) -> None:
        self.url, self.stop = url, threading.Event()
        self.results: list[tuple[float, int, str | None]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(CLIENTS)]

    def _client(self, i: int) -> None:
        parts = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        n = 0
        while not self.stop.is_set():
            body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": f"client {i} request {n}"}],
                               "max_tokens": 4})  # fmt: skip
            try:
                conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                fingerprint = _fingerprint(raw) if status == 200 else None
            except (OSError, http.client.HTTPException) as err:
                status, fingerprint = 0, None
                print(f"client {i}: {type(err).__name__}: {err}")
                conn.close()
            with self.lock:
                self.results.append((time.time(), status, fingerprint))
            n += 1
            self.stop.wait(PACE_S)
        conn.close()

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    @property
    def failed(self) -> list[tuple[float, int, str | None]]:
        return [r for r in self.results if r[1] != 200]


def unit_starts(lab: ServeLab, host: str, name: str) -> list[float]:
    """When each `docker run` of the container started (Docker's start events)."""
    return lab.starts(host, name)


def test_two_replicas_register_and_round_robin_reaches_both(lab: ServeLab) -> None:
    inventory = replicas(lab, "round_robin")
    first = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert first.ok, lab.explain(first)
    listed = get_json(f"{router_url(lab)}/workers")["workers"]
    urls = worker_urls(lab, "c0", "c1")
    assert sorted((w["url"], w["is_healthy"], w["worker_type"]) for w in listed) == [
        (u, True, "regular") for u in urls
    ]
    before = {u: counters(u) for u in urls}
    assert [chat(router_url(lab), f"round robin {i}") for i in range(8)] == [200] * 8
    assert served(lab, urls, before) == [4.0, 4.0]  # round_robin: every other request
    again = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert again.ok, lab.explain(again)
    assert again.count("changed") == 0, [str(p) for p in lab.progress if p.status == "changed"]
    lab.state = {"inventory": inventory}  # type: ignore[attr-defined]


def test_cache_aware_sends_a_shared_prefix_to_one_worker(lab: ServeLab) -> None:
    inventory = replicas(lab, "cache_aware")
    routers = len(unit_starts(lab, "c0", "flashfleet-router"))
    run = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert run.ok, lab.explain(run)
    assert len(unit_starts(lab, "c0", "flashfleet-router")) == routers + 1  # its argv changed: restarted
    urls = worker_urls(lab, "c0", "c1")
    before = {u: counters(u) for u in urls}
    prefix = "You are a careful assistant. " * 40
    assert [chat(router_url(lab), f"{prefix} question {i}") for i in range(6)] == [200] * 6
    assert sorted(served(lab, urls, before)) == [0.0, 6.0]


def test_a_rolling_update_under_load_drops_no_request(
    lab: ServeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = replicas(lab, "cache_aware", options={"max_running_requests": 32})
    runs_before = {h: len(unit_starts(lab, h, f"flashfleet-replica-{i}")) for i, h in enumerate(("c0", "c1"))}
    routers = len(unit_starts(lab, "c0", "flashfleet-router"))
    with Load(router_url(lab)) as load:
        time.sleep(1)
        update = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
        time.sleep(1)
    assert update.ok, lab.explain(update)
    assert len(load.results) > 50, len(load.results)
    assert load.failed == [], f"{len(load.failed)} of {len(load.results)} requests failed during the update"
    new = {}
    for i, host in enumerate(("c0", "c1")):
        starts = unit_starts(lab, host, f"flashfleet-replica-{i}")
        assert len(starts) == runs_before[host] + 1, (
            f"replica-{i} restarted {len(starts) - runs_before[host]} times"
        )
        cmd = containers(lab, host)[f"flashfleet-replica-{i}"]["Config"]["Cmd"]  # the last start's
        assert cmd[cmd.index("--max-running-requests") + 1] == "32"
        new[i] = starts[-1]
    # one after the other: replica-1 restarted only once replica-0 was ready again (and back)
    assert new[1] >= new[0] + LOAD_SECONDS, new
    with capsys.disabled():  # the figures, in the run's log
        print(f"\nrolling update under load: {len(load.failed)} of {len(load.results)} requests failed; "
              f"replica-1 restarted {new[1] - new[0]:.1f} s after replica-0, with the new argv")  # fmt: skip
    assert len(unit_starts(lab, "c0", "flashfleet-router")) == routers  # the router kept serving
    # It only wants the worker beside it: Requires= would have restarted it with replica-0.
    unit = lab.ssh("c0", "systemctl cat flashfleet-router.service")
    assert "Wants=flashfleet-replica-0.service" in unit, unit
    assert "Requires=" not in unit, unit
    lab.state = {"inventory": inventory}  # type: ignore[attr-defined]


def test_a_dead_replica_is_degraded_and_up_brings_back_only_it(lab: ServeLab, tmp_path: Path, capsys) -> None:
    inventory = lab.state["inventory"]  # type: ignore[attr-defined]
    (tmp_path / "inv.json").write_text(json.dumps(inventory))
    status = ["status", "rep", "--inventory", str(tmp_path / "inv.json"), "--runs-dir", str(tmp_path)]
    assert main(status) == 0
    assert "endpoint: serving: 2 of 2 instances healthy" in capsys.readouterr().out
    replica0 = len(unit_starts(lab, "c0", "flashfleet-replica-0"))
    with Load(router_url(lab)) as load:
        time.sleep(1)
        lab.ssh("c1", "systemctl stop flashfleet-replica-1.service")  # as if its host went away
        time.sleep(3)
    with capsys.disabled():  # the figure, in the run's log (the status output below is read)
        print(f"\na replica stopped under load: {len(load.failed)} of {len(load.results)} requests failed")
    assert len(load.failed) < len(load.results) / 2  # the router's retries send the rest to replica-0
    assert main(status) == 1
    out = capsys.readouterr().out
    assert "endpoint: degraded: 1 of 2 instances healthy; down: replica-1" in out
    back = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert back.ok, lab.explain(back)
    assert len(unit_starts(lab, "c0", "flashfleet-replica-0")) == replica0  # the healthy one untouched
    assert main(status) == 0
    assert "endpoint: serving: 2 of 2 instances healthy" in capsys.readouterr().out


def test_one_prefill_two_decodes_through_the_router_in_pd_mode(lab: ServeLab) -> None:
    a = lab.address
    stack = make_stack("pd", "pd", [a("c0"), a("c1"), a("c2")], strategy="high-throughput",
                       cluster={"prefill": 1, "decode": 2, "router": {"policy": "round_robin"}})  # fmt: skip
    inventory = lab.inventory((stack, HOSTS))
    run = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert run.ok, lab.explain(run)
    prefill, decodes = worker_urls(lab, "c0"), worker_urls(lab, "c1", "c2", port=32000)
    listed = {
        w["url"]: w["worker_type"]
        for w in get_json(f"{router_url(lab)}/workers")["workers"]
        if w["is_healthy"]
    }
    assert listed == {prefill[0]: "prefill", decodes[0]: "decode", decodes[1]: "decode"}
    before = {u: counters(u) for u in prefill + decodes}
    assert [chat(router_url(lab), f"pd request {i} with a prompt") for i in range(6)] == [200] * 6
    assert served(lab, prefill, before, PROMPT_TOKENS)[0] > 0  # the prefill did the prompts
    assert all(n > 0 for n in served(lab, decodes, before, GENERATION_TOKENS))  # both decodes decoded


def test_a_router_on_a_host_of_its_own_fronts_the_replicas_on_the_others(lab: ServeLab) -> None:
    a = lab.address
    stack = make_stack("own", "unified", [a("c0"), a("c1"), a("c2")], strategy="high-throughput",
                       cluster={"replicas": 2, "router": {"policy": "round_robin", "host": a("c2")}})  # fmt: skip
    inventory = lab.inventory((stack, HOSTS))
    run = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert run.ok, lab.explain(run)
    running = lab.ssh("c2", "systemctl list-units 'flashfleet-*' --state=running --no-legend --plain")
    assert [line.split()[0] for line in running.splitlines()] == ["flashfleet-router.service"]
    endpoint = f"http://{a('c2')}:30000"
    urls = worker_urls(lab, "c0", "c1")
    listed = get_json(f"{endpoint}/workers")["workers"]
    assert sorted(w["url"] for w in listed if w["is_healthy"]) == urls
    before = {u: counters(u) for u in urls}
    assert [chat(endpoint, f"own router {i}") for i in range(6)] == [200] * 6
    assert served(lab, urls, before) == [3.0, 3.0]  # round_robin, from the router's own host


def test_replicas_load_their_weights_from_each_other_one_after_another(lab: ServeLab) -> None:
    """peer_load=nccl: replica-1 loads from replica-0 and replica-2 from replica-1 (SGLang's
    remote-instance loader over NCCL, as the stand-in seeds answer it), each container started only
    once the replica before it answered /health: an NCCL seed sends to one loader at a time, and
    the chain keeps it so."""
    a = lab.address
    peer_s = 1.5  # the weights on the wire, per loader
    for host in HOSTS:
        set_knobs(lab, host, load_seconds=LOAD_SECONDS, peer_load_seconds=peer_s)
    stack = make_stack("peer-nccl", "unified", [a(h) for h in HOSTS], strategy="high-throughput",
                       options={"peer_load": "nccl"}, cluster={"replicas": 3, "router": {"policy": "round_robin"}})  # fmt: skip
    inventory = lab.inventory((stack, HOSTS))
    # a first start on every node at once (no unit left by the stacks before): the chain alone
    # orders the loads
    down = lab.run("teardown.yml", inventory, extravars=FAST)
    assert down.ok, lab.explain(down)
    run = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert run.ok, lab.explain(run)
    starts = [unit_starts(lab, h, f"flashfleet-replica-{i}")[-1] for i, h in enumerate(HOSTS)]
    # each started once the one before it was ready: its own load (replica-0) or its peer load
    assert starts[1] >= starts[0] + LOAD_SECONDS, starts
    assert starts[2] >= starts[1] + peer_s, starts
    for i, host in enumerate(HOSTS[1:], start=1):
        log = lab.ssh(host, f"journalctl -u flashfleet-replica-{i}.service --no-pager -o cat")
        assert f"Loaded weights from remote instance http://{a(HOSTS[i - 1])}:31000" in log, log
        unit = lab.ssh(host, f"systemctl cat flashfleet-replica-{i}.service")
        assert f'"http://{a(HOSTS[i - 1])}:31000/health"' in unit, unit  # its ExecStartPre waits for it
    log0 = lab.ssh("c0", "journalctl -u flashfleet-replica-0.service --no-pager -o cat")
    assert "from remote instance" not in log0  # the chain's seed loads from its disk
    urls = worker_urls(lab, *HOSTS)
    before = {u: counters(u) for u in urls}
    assert [chat(router_url(lab), f"peer loaded {i}") for i in range(6)] == [200] * 6
    assert served(lab, urls, before) == [2.0, 2.0, 2.0]
    for host in HOSTS:
        set_knobs(lab, host, load_seconds=LOAD_SECONDS)


def test_replicas_read_their_weights_from_the_first_all_at_once(lab: ServeLab) -> None:
    """peer_load=on: replica-1 and replica-2 both read from replica-0 over the TransferEngine (as the
    stand-in seed publishes its sessions), both started once replica-0 answered /health, side by
    side: the seed serves several loaders, and no chain orders them."""
    a = lab.address
    peer_s = 3.0  # the weights on the wire, per loader
    for host in HOSTS:
        set_knobs(lab, host, load_seconds=LOAD_SECONDS, peer_load_seconds=peer_s)
    stack = make_stack("peer-te", "unified", [a(h) for h in HOSTS], strategy="high-throughput",
                       options={"peer_load": "on"}, cluster={"replicas": 3, "router": {"policy": "round_robin"}})  # fmt: skip
    inventory = lab.inventory((stack, HOSTS))
    down = lab.run("teardown.yml", inventory, extravars=FAST)
    assert down.ok, lab.explain(down)
    run = lab.run("site.yml", inventory, tags=SERVE, extravars=FAST)
    assert run.ok, lab.explain(run)
    starts = [unit_starts(lab, h, f"flashfleet-replica-{i}")[-1] for i, h in enumerate(HOSTS)]
    assert min(starts[1:]) >= starts[0] + LOAD_SECONDS, starts
    assert abs(starts[2] - starts[1]) < peer_s, starts  # not one after the other's load
    for i, host in enumerate(HOSTS[1:], start=1):
        log = lab.ssh(host, f"journalctl -u flashfleet-replica-{i}.service --no-pager -o cat")
        assert f"Loaded weights from remote instance http://{a(HOSTS[0])}:31000" in log, log
        unit = lab.ssh(host, f"systemctl cat flashfleet-replica-{i}.service")
        assert f'"http://{a(HOSTS[0])}:31000/health"' in unit, unit
    urls = worker_urls(lab, *HOSTS)
    before = {u: counters(u) for u in urls}
    assert [chat(router_url(lab), f"peer read {i}") for i in range(6)] == [200] * 6
    assert served(lab, urls, before) == [2.0, 2.0, 2.0]
    for host in HOSTS:
        set_knobs(lab, host, load_seconds=LOAD_SECONDS)
