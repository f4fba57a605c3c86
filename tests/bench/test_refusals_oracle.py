"""Runs that measured nothing are refused, with the cause named: the REAL sglang 0.5.23
bench_serving (oracle venv) against stand-in servers that misbehave on purpose, behind the REAL
SGLang router (same venv, tests/serve/real_router.py) where a PD pair is routed."""

from __future__ import annotations

import json
from dataclasses import replace

from flashfleet.bench.profiles import get_profile
from flashfleet.bench.servers import Server
from flashfleet.bench.session import EXIT_BENCH_FAILED, BenchRequest, bench
from tests.bench.conftest import ORACLE, tiny
from tests.bench.fakes import FakeCluster
from tests.serve.real_router import real_router
from tests.serve.standin_sglang import StandinServer, StandinState


def run_bench(tmp_path, runner, url, *, servers=(), profile=None, timeout=3.0):
    request = BenchRequest(
        stack="stk",
        profile=profile or tiny(get_profile("sweep"), concurrency=(2,), requests=4),
        results_root=tmp_path,
        endpoint=url,
        python=str(ORACLE),
        servers=tuple(servers),
        ready_timeout_s=timeout,
    )
    lines: list[str] = []
    outcome = bench(request, FakeCluster(runner_of=lambda stack: runner), log=lines.append)
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    report = (outcome.run_dir / "report.md").read_text()
    return outcome, summary, report, lines


def test_zero_token_answers_are_refused(tmp_path, oracle_runner):
    with StandinServer(StandinState(zero_tokens=True)) as server:
        outcome, summary, report, _ = run_bench(tmp_path, oracle_runner, server.url)
        assert len([p for p in server.state.paths() if p == "/generate"]) >= 4  # it really ran
    assert outcome.exit_code == EXIT_BENCH_FAILED
    assert summary["valid"] is False
    # bench_serving itself exits 0 and reports the 4 x 8 tokens it ASKED for as output tokens
    assert outcome.run.levels[0].completed.returncode == 0
    assert summary["verdict"] == [
        "concurrency 2: measured nothing: 4 requests came back with no text "
        "(0 output tokens; bench_serving counted the 32 requested)"
    ]
    assert report.splitlines()[2] == "**Verdict: NOT valid** (these figures measured nothing you can use):"
    assert (outcome.run_dir / "raw" / "c0002.log").is_file()  # the raw logs are kept


def test_failed_requests_are_refused(tmp_path, oracle_runner):
    # the warm-up request succeeds, then 2 of the 4 measured requests fail
    with StandinServer(StandinState(fail_after=3)) as server:
        outcome, summary, report, _ = run_bench(tmp_path, oracle_runner, server.url)
    assert outcome.exit_code == EXIT_BENCH_FAILED
    assert summary["verdict"] == ["concurrency 2: 2 of 4 requests failed"]
    assert summary["levels"][0]["completed"] == 2  # bench_serving itself exited 0 with a "result"
    assert outcome.run.levels[0].completed.returncode == 0
    assert "- concurrency 2: 2 of 4 requests failed" in report


def test_pd_pair_where_decode_answers_everything_is_refused_before_the_benchmark(tmp_path, oracle_runner):
    """The real router, started without PD mode in front of the decode alone (a router that
    lost its prefill): the prefill never sees a request and the decode prefills them itself."""
    prefill, decode = StandinState(), StandinState()
    with StandinServer(prefill) as p, StandinServer(decode) as d:
        args = ["--worker-urls", d.url, "--policy", "round_robin"]
        with real_router(args, expect=[d.url], log=tmp_path / "router.log") as r:
            servers = [Server("prefill", p.url), Server("decode", d.url)]
            outcome, summary, report, lines = run_bench(tmp_path, oracle_runner, r.url, servers=servers)
    assert outcome.exit_code == EXIT_BENCH_FAILED
    assert outcome.run.levels == ()  # readiness found it: no benchmark request was sent
    (problem,) = summary["problems"]
    assert problem.startswith(f"not ready after 3 s: prefill {p.url}: answers /health but counted no part of")
    assert problem.endswith("(still initializing, or a silent PD fallback: decode did it all)")
    assert f"bench: {problem}" in lines
    assert f"- {problem}" in report
    assert decode.counters["sglang:prompt_tokens_total"] > 0  # decode prefilled the probes itself


def test_pd_pair_that_shares_the_work_is_valid(tmp_path, oracle_runner):
    """The real router in PD mode: each request goes to the prefill and the decode, bootstrap
    room and all, as in a PD deployment."""
    prefill, decode = (
        StandinState(disaggregation="prefill", bootstrap_port=0),
        StandinState(disaggregation="decode"),
    )
    with StandinServer(prefill) as p, StandinServer(decode) as d:
        args = ["--pd-disaggregation", "--prefill", p.url, str(prefill.bootstrap_port), "--decode", d.url,
                "--policy", "round_robin"]  # fmt: skip
        with real_router(args, expect=[p.url, d.url], log=tmp_path / "router.log") as r:
            servers = [Server("prefill", p.url), Server("decode", d.url)]
            outcome, summary, report, _ = run_bench(tmp_path, oracle_runner, r.url, servers=servers)
    assert outcome.exit_code == 0, summary["verdict"]
    served = summary["worker_shares"]
    assert served[p.url]["sglang:prompt_tokens_total"] > 0
    # the prefill answers each request's first token only (warm-up + 4 measured), as in PD
    assert served[p.url]["sglang:generation_tokens_total"] == 5
    # the readiness probes, the warm-up and the 4 measured requests of 8 tokens: all decoded on
    # the decode server
    assert served[d.url]["sglang:generation_tokens_total"] >= 5 * 8
    assert "every worker behind the router served its share" in report.splitlines()[2]


def test_one_rank_not_ready_is_refused_before_any_request(tmp_path, oracle_runner):
    leader, other = StandinState(), StandinState(dp_size=2, dp_ready=1)
    with StandinServer(leader) as a, StandinServer(other) as b:
        servers = [Server("server", a.url), Server("server", b.url, dp_ranks=2)]
        outcome, summary, report, _ = run_bench(tmp_path, oracle_runner, a.url, servers=servers, timeout=1.0)
        assert not [p for p in leader.paths() + other.paths() if p == "/generate"]  # nothing measured
    assert outcome.exit_code == EXIT_BENCH_FAILED
    (problem,) = summary["problems"]
    assert problem == f"not ready after 1 s: server {b.url}: 1 of 2 data-parallel ranks report a state"
    assert summary["levels"] == []
    assert f"- {problem}" in report


def test_an_unhealthy_node_is_refused(tmp_path, oracle_runner):
    with StandinServer() as a, StandinServer(StandinState(healthy=False)) as b:
        servers = [Server("prefill", a.url), Server("decode", b.url)]
        outcome, summary, _, _ = run_bench(tmp_path, oracle_runner, a.url, servers=servers, timeout=0.5)
    assert outcome.exit_code == EXIT_BENCH_FAILED
    assert summary["problems"][0].startswith(f"not ready after 0 s: decode {b.url}: /health answered 503")


def test_the_load_generator_is_pinned_in_the_fingerprint(tmp_path, oracle_runner):
    with StandinServer() as server:
        outcome, summary, _, _ = run_bench(tmp_path, oracle_runner, server.url)
    assert outcome.exit_code == 0, summary["verdict"]
    fp = json.loads((outcome.run_dir / "fingerprint.json").read_text())
    assert fp["method"]["client_module"] == "sglang.benchmark.serving"
    assert fp["method"]["client_version"] == "0.5.23"  # read from the interpreter that ran it
    assert fp["load_generator"]["sglang"] == "0.5.23"


def test_agentic_profile_reports_one_over_p90_e2e_per_token(tmp_path, oracle_runner):
    profile = replace(tiny(get_profile("sweep"), concurrency=(2,), requests=4), kind="agentic")
    with StandinServer() as server:
        outcome, summary, _, _ = run_bench(tmp_path, oracle_runner, server.url, profile=profile)
    assert outcome.exit_code == 0, summary["verdict"]
    rate = summary["levels"][0]["agentic_rate"]
    # 8 tokens: 20 ms to the first, then 7 gaps of 2 ms -> at most 8 / 0.034 s tokens/s per user
    assert rate is not None
    assert 0 < rate <= 8 / 0.034 * 1.05
    assert "--output-details" in outcome.run.levels[0].argv
