"""A PD cluster (one prefill, two decodes, each on its own test host) behind the real router (SMG's
`smg launch`, in its PD mode) on real systemd test hosts with the real Docker engine
(tests/serve/lab.py): an update of its options under load, then failure drills under load: a
prefill killed, a decode killed, the router's unit restarted and its container restarted.

Every answer names the versions of the prefill and the decode that served it: the stand-in
decode learns the prefill's through the room's KV handoff (its bootstrap server) and stamps both
in the answer's system_fingerprint (tests/serve/standin_sglang.py, layout_version). Each test
prints its figures: requests, failures, seconds.

One scenario per module: three hosts boot once and the steps follow each other on them."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bench.servers import GENERATION_TOKENS
from flashfleet.cli import main

from .lab import ServeLab, make_stack, serve_lab
from .test_cluster_hosts import FAST, LOAD_SECONDS, Load, chat, counters, get_json, router_url, worker_urls
from .test_site import containers, set_knobs

HOSTS = ["c0", "c1", "c2"]
SERVE = "serve,verify"
WORKERS = {"c0": "flashfleet-prefill-0", "c1": "flashfleet-decode-0", "c2": "flashfleet-decode-1"}


@pytest.fixture(scope="module")
def lab() -> Iterator[ServeLab]:
    with serve_lab(HOSTS) as lab:
        for host in HOSTS:
            set_knobs(lab, host, load_seconds=LOAD_SECONDS)
        yield lab


def pd(lab: ServeLab, options: dict[str, Any] | None = None) -> dict[str, Any]:
    stack = make_stack("pd", "pd", [lab.address(h) for h in HOSTS], strategy="high-throughput", options=options,
                       cluster={"prefill": 1, "decode": 2, "router": {"policy": "round_robin"}})  # fmt: skip
    return lab.inventory((stack, HOSTS))


def pair(fingerprint: str) -> tuple[str, str]:
    """("prefill version", "decode version") from the decode's `prefill=P decode=D`."""
    fields = dict(part.split("=", 1) for part in fingerprint.split())
    return fields["prefill"], fields["decode"]


def healthy_workers(lab: ServeLab) -> set[str]:
    return {w["url"] for w in get_json(f"{router_url(lab)}/workers")["workers"] if w["is_healthy"]}


def all_workers(lab: ServeLab) -> set[str]:
    return set(worker_urls(lab, "c0") + worker_urls(lab, "c1", "c2", port=32000))


def wait_until(what: Any, timeout: float = 90) -> float:
    """Polls `what()` until it is true; the time it was."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if what():
                return time.time()
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def drill_figures(load: Load, since: float) -> tuple[int, int, float]:
    """(requests sent since `since`, how many failed, seconds from `since` to the first answer
    after the last failure: when the endpoint served again)."""
    after = [r for r in load.results if r[0] >= since]
    failed = [r for r in after if r[1] != 200]
    last = max((r[0] for r in failed), default=since)
    back = min((r[0] for r in after if r[1] == 200 and r[0] > last), default=float("nan"))
    return len(after), len(failed), back - since


def test_a_pd_update_under_load_never_pairs_a_prefill_and_a_decode_of_different_versions(
    lab: ServeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    old = pd(lab)
    first = lab.run("site.yml", old, tags=SERVE, extravars=FAST)
    assert first.ok, lab.explain(first)
    assert healthy_workers(lab) == all_workers(lab)
    # each decode node runs the watcher that restarts its decode after a prefill restarted; the
    # prefill's node none; a second run changes nothing
    watching = {
        h: lab.ssh(h, "systemctl is-active flashfleet-pd-heal.service || true").strip() for h in HOSTS
    }
    assert watching == {"c0": "inactive", "c1": "active", "c2": "active"}, watching
    again = lab.run("site.yml", old, tags=SERVE, extravars=FAST)
    assert again.ok, lab.explain(again)
    assert again.count("changed") == 0, [str(p) for p in lab.progress if p.status == "changed"]
    new = pd(lab, options={"max_running_requests": 32})
    with Load(router_url(lab)) as load:
        time.sleep(2)
        update = lab.run("site.yml", new, tags=SERVE, extravars=FAST)
        time.sleep(2)
    assert update.ok, lab.explain(update)
    served = [(t, pair(fp)) for t, code, fp in load.results if code == 200 and fp]
    assert len(served) == len([r for r in load.results if r[1] == 200])  # every answer names its pair
    mixed = [p for _, p in served if p[0] != p[1]]
    assert mixed == [], f"{len(mixed)} answers from a prefill and a decode of different versions: {mixed[:3]}"
    versions = list(dict.fromkeys(p[0] for _, p in served))
    assert len(versions) == 2, versions  # the old group served before the update, the new one after
    last_old = max(t for t, p in served if p[0] == versions[0])
    first_new = min(t for t, p in served if p[0] == versions[1])
    assert last_old < first_new  # never both at once
    # every worker restarted once with the new option, and the old ones all ended before any new
    # one started
    ends, starts = [], []
    for host, name in WORKERS.items():
        cmd = containers(lab, host)[name]["Config"]["Cmd"]
        assert cmd[cmd.index("--max-running-requests") + 1] == "32", (host, cmd)
        ends.append(max(lab.starts(host, name, event="die")))
        starts.append(max(lab.starts(host, name)))
    assert max(ends) < min(starts), (ends, starts)
    failed = load.failed
    with capsys.disabled():
        print(
            f"\nPD update under load (1 prefill, 2 decodes, whole group cut): {len(load.results)} requests, "
            f"{len(failed)} failed (during the cut), 0 of {len(served)} answers from a mixed pair; "
            f"outage {first_new - last_old:.1f} s from the last old answer to the first new one; "
            f"old workers all stopped {min(starts) - max(ends):.1f} s before the first new one started"
        )
    assert healthy_workers(lab) == all_workers(lab)  # every worker back in the router
    lab.state = {"inventory": new}  # type: ignore[attr-defined]


def kill_drill(
    lab: ServeLab,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    host: str,
    instance: str,
    restarted_too: dict[str, int] | None = None,
) -> tuple[int, int, float, str]:
    """Kills the instance's container under load: (requests, failed, seconds until served again,
    the endpoint line `flashfleet status` printed while it was down). ``restarted_too``: other
    workers' hosts and their container starts before the kill, each waited for to start again
    (its recovery) before the endpoint counts as back."""
    inventory = lab.state["inventory"]  # type: ignore[attr-defined]
    name = WORKERS[host]
    before = len(lab.starts(host, name))
    with Load(router_url(lab)) as load:
        time.sleep(2)
        killed = time.time()
        lab.ssh(host, f"docker kill {name}")  # the process dies; systemd starts it again (Restart=)
        time.sleep(1)
        (tmp_path / "inv.json").write_text(json.dumps(inventory))
        args = ["status", "pd", "--inventory", str(tmp_path / "inv.json"), "--runs-dir", str(tmp_path)]
        code = main(args)
        shown = capsys.readouterr().out
        wait_until(lambda: len(lab.starts(host, name)) > before)
        for other, starts in (restarted_too or {}).items():
            wait_until(lambda: len(lab.starts(other, WORKERS[other])) > starts, timeout=120)  # noqa: B023
        wait_until(lambda: healthy_workers(lab) == all_workers(lab))
        # SMG's circuit breaker may keep the endpoint closed after the worker is back (it opens
        # after 10 failures and tries again after 60 s): served again is what a client sees
        wait_until(lambda: chat(router_url(lab), "back yet?") == 200, timeout=240)
        time.sleep(3)
    assert code == 1, shown
    assert f"down: {instance} (" in shown, shown
    sent, failed, back = drill_figures(load, killed)
    assert not math.isnan(back), "never served again"
    ok_after = [r for r in load.results if r[0] > killed + back and r[1] != 200]
    assert ok_after == [], ok_after  # once back, nothing fails
    return sent, failed, back, next(line for line in shown.splitlines() if line.startswith("endpoint:"))


def test_a_killed_prefill_is_named_down_and_the_decodes_serve_its_successor(
    lab: ServeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decode keeps the prefill process it bootstrapped with (the stand-in as SGLang's decode):
    after the prefill's unplanned restart, each decode node's watcher restarts its decode once,
    and both decode for the prefill's successor."""
    decodes = worker_urls(lab, "c1", "c2", port=32000)
    decode_hosts = ["c1", "c2"]
    starts = {h: len(lab.starts(h, WORKERS[h])) for h in decode_hosts}
    sent, failed, back, said = kill_drill(lab, tmp_path, capsys, "c0", "prefill-0", restarted_too=starts)
    restarts = {h: len(lab.starts(h, WORKERS[h])) - starts[h] for h in decode_hosts}
    healed = {h: lab.ssh(h, "journalctl -u flashfleet-pd-heal.service -o cat | grep -c '; restarting '").strip()
              for h in decode_hosts}  # fmt: skip
    with capsys.disabled():
        print(f"\nprefill killed under load: {failed} of {sent} requests failed; the endpoint served again "
              f"{back:.1f} s after the kill (systemd starts the unit again after RestartSec=10 s, then each "
              f"decode node's watcher restarts its decode); decode restarts: {restarts}; "
              f"status said: {said}")  # fmt: skip
    assert said.startswith("endpoint: down: no prefill instance is up; down: prefill-0 ("), said
    # the decodes are not stalled on the prefill that went away: both decode for its successor
    before = {u: counters(u)[GENERATION_TOKENS] for u in decodes}
    with Load(router_url(lab)) as load:
        time.sleep(3)
    assert load.failed == []
    assert all(counters(u)[GENERATION_TOKENS] > before[u] for u in decodes)
    assert failed > 0  # the only prefill: nothing serves without it
    assert failed < sent  # bounded: served before the kill and again after
    assert back < 180
    # each decode restarted once by its watcher, not in a loop: still once after more load
    assert restarts == dict.fromkeys(decode_hosts, 1), restarts
    assert healed == dict.fromkeys(decode_hosts, "1"), healed
    assert {h: len(lab.starts(h, WORKERS[h])) - starts[h] for h in decode_hosts} == restarts


def test_a_killed_decode_is_named_down_and_the_other_decode_serves(
    lab: ServeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sent, failed, back, said = kill_drill(lab, tmp_path, capsys, "c1", "decode-0")
    with capsys.disabled():
        print(f"\ndecode killed under load: {failed} of {sent} requests failed; the endpoint served "
              f"again {back:.1f} s after the kill; status said: {said}")  # fmt: skip
    assert said.startswith("endpoint: degraded: 2 of 3 instances healthy; down: decode-0 ("), said
    assert failed < sent  # decode-1 serves meanwhile
    assert back < 180


@pytest.mark.parametrize(
    "how", ["systemctl restart flashfleet-router.service", "docker restart flashfleet-router"]
)
def test_a_restarted_router_comes_back_with_every_worker_registered(
    lab: ServeLab, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """The router's workers are on its argv (--prefill, --decode): a new process, or the same
    container started again, registers them all, with nothing to re-add by hand."""
    argv = containers(lab, "c0")["flashfleet-router"]["Config"]["Cmd"]
    assert {argv[i + 1] for i, w in enumerate(argv) if w in ("--prefill", "--decode")} == all_workers(lab)
    with Load(router_url(lab)) as load:
        time.sleep(2)
        restarted = time.time()
        lab.ssh("c0", how)
        wait_until(lambda: healthy_workers(lab) == all_workers(lab))
        registered = time.time()
        wait_until(lambda: chat(router_url(lab), "back yet?") == 200, timeout=240)
        time.sleep(3)
    sent, failed, back = drill_figures(load, restarted)
    with capsys.disabled():
        print(f"\nrouter restarted ({how}) under load: {failed} of {sent} requests failed; all 3 workers "
              f"registered and healthy {registered - restarted:.1f} s after, the endpoint served again "
              f"{back:.1f} s after")  # fmt: skip
    assert healthy_workers(lab) == all_workers(lab)
    assert back < 180
    assert lab.ssh("c0", "systemctl is-active flashfleet-router.service").strip() == "active"


def test_a_stopped_router_is_named_down_and_comes_back_with_every_worker(
    lab: ServeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the router's unit stopped, `status` names the router as what is down (every worker
    still answers its own /health); started again, it registers every worker from its argv."""
    (tmp_path / "inv.json").write_text(json.dumps(lab.state["inventory"]))  # type: ignore[attr-defined]
    args = ["status", "pd", "--inventory", str(tmp_path / "inv.json"), "--runs-dir", str(tmp_path)]
    lab.ssh("c0", "systemctl stop flashfleet-router.service")
    try:
        code = main(args)
        shown = capsys.readouterr().out
    finally:
        lab.ssh("c0", "systemctl start flashfleet-router.service")
    said = next(line for line in shown.splitlines() if line.startswith("endpoint:"))
    with capsys.disabled():
        print(f"\nrouter stopped: status said: {said}")
    assert code == 1, shown
    assert said.startswith(f"endpoint: down: the router at {router_url(lab)} does not answer"), said
    wait_until(lambda: healthy_workers(lab) == all_workers(lab))
    wait_until(lambda: chat(router_url(lab), "back yet?") == 200, timeout=240)
