"""Ready means serving: a server that answers /health before it can generate is waited for, and
the wait is reported (a stand-in whose first generations fail while /health says 200)."""

from __future__ import annotations

import json
import sys
import threading
import time

from flashfleet.bench.profiles import get_profile
from flashfleet.bench.servers import Server, fetch_here, post_here, wait_ready
from flashfleet.bench.session import BenchRequest, bench
from tests.bench.conftest import tiny
from tests.bench.fakes import FakeCluster
from tests.serve.standin_sglang import StandinServer, StandinState

SERVES_AFTER_S = 1.5


def _statuses(server: StandinServer, path: str) -> int:
    return sum(1 for p in server.state.paths() if p == path)


def test_a_server_healthy_before_it_serves_is_waited_for():
    with StandinServer(StandinState(serves_after_s=SERVES_AFTER_S)) as server:
        s = Server("server", server.url)
        t0 = time.monotonic()
        waiting = wait_ready([s], timeout_s=30, fetch=fetch_here, generate=post_here, interval_s=0.2)
        took = time.monotonic() - t0
        generations = _statuses(server, "/generate")
    assert waiting == []
    assert took >= SERVES_AFTER_S - 0.2  # not before it could serve (its clock started a little earlier)
    assert generations >= 2  # refused at least once, then answered
    assert took < 10


def test_health_alone_would_have_called_it_ready_at_once():
    with StandinServer(StandinState(serves_after_s=30)) as server:
        t0 = time.monotonic()
        assert (
            wait_ready([Server("server", server.url)], timeout_s=30, fetch=fetch_here, interval_s=0.2) == []
        )
        assert time.monotonic() - t0 < 2
        status, _ = post_here({f"{server.url}/generate": {"text": "x"}})[f"{server.url}/generate"]
    assert status == 503  # "ready", and yet no generation is answered


def test_a_server_that_never_serves_is_not_ready_and_says_why():
    with StandinServer(StandinState(serves_after_s=60)) as server:
        waiting = wait_ready(
            [Server("server", server.url)],
            timeout_s=0.5,
            fetch=fetch_here,
            generate=post_here,
            interval_s=0.2,
        )
    (why,) = waiting
    assert why.startswith(f"server {server.url}: answers /health but not a generation yet (503")


def test_the_endpoint_in_front_must_serve_too():
    with (
        StandinServer() as worker,
        StandinServer(StandinState(serves_after_s=60)) as router,
    ):
        waiting = wait_ready(
            [Server("server", worker.url)], timeout_s=0.5, fetch=fetch_here, generate=post_here,
            endpoint=router.url, interval_s=0.2,
        )  # fmt: skip
    assert waiting == [f"endpoint {router.url}: answers /health but not a generation yet "
                       "(503: {\"error\": \"stand-in: the first prefill is still initializing\"})"]  # fmt: skip


def test_bench_waits_for_the_first_generation_and_reports_how_long(tmp_path):
    lines: list[str] = []
    with StandinServer(StandinState(serves_after_s=SERVES_AFTER_S)) as server:
        request = BenchRequest(
            stack="stk", profile=tiny(get_profile("sweep"), concurrency=(1,)), results_root=tmp_path,
            endpoint=server.url, local=True, python=sys.executable,
            servers=(Server("server", server.url),), ready_timeout_s=30,
        )  # fmt: skip
        outcome = bench(request, FakeCluster(), lines.append)
    (said,) = [ln for ln in lines if "answered a generation after" in ln]
    waited = float(said.split("after ")[1].split(" s")[0])
    assert waited >= SERVES_AFTER_S - 0.2
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    assert summary["ready_wait_s"] == waited
    assert not any("not ready" in p for p in summary["problems"])


def test_a_prefill_the_router_sends_nothing_yet_is_waited_for():
    """PD: each prefill and decode must count its part of a generation sent through the router;
    until the router sends the prefill anything (decode does it all), it is not ready."""
    with StandinServer() as prefill, StandinServer() as decode:
        router_state = StandinState(prefill=None, decode=decode.state)  # decode alone, for now
        with StandinServer(router_state) as router:
            servers = [Server("prefill", prefill.url), Server("decode", decode.url)]
            late = threading.Timer(SERVES_AFTER_S, lambda: setattr(router_state, "prefill", prefill.state))
            late.start()
            t0 = time.monotonic()
            waiting = wait_ready(
                servers,
                timeout_s=30,
                fetch=fetch_here,
                generate=post_here,
                endpoint=router.url,
                interval_s=0.2,
            )
            took = time.monotonic() - t0
            late.cancel()
    assert waiting == []
    assert took >= SERVES_AFTER_S - 0.2
    assert prefill.state.counters["sglang:prompt_tokens_total"] > 0


def test_a_prefill_the_router_never_sends_to_is_not_ready_and_says_why():
    with StandinServer() as prefill, StandinServer() as decode:
        router = StandinServer(StandinState(prefill=None, decode=decode.state))  # decode does it all
        with router:
            waiting = wait_ready(
                [Server("prefill", prefill.url), Server("decode", decode.url)], timeout_s=0.5,
                fetch=fetch_here, generate=post_here, endpoint=router.url, interval_s=0.2,
            )  # fmt: skip
    # decode counted its part at once; the last poll sent one generation for the prefill alone
    assert waiting == [
        f"prefill {prefill.url}: answers /health but counted no part of 1 generation sent through the endpoint "
        "(still initializing, or a silent PD fallback: decode did it all)"
    ]
