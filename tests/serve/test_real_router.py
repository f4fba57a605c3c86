"""The real SGLang router (sglang-router 0.3.2, Rust) in front of stand-in workers on loopback:
it registers them from their own answers (/health, /server_info, /model_info), spreads requests
by its policy, drives a PD pair with its bootstrap fields, and routes around a dead worker.
Each stand-in's record (`served_log`) shows which worker served which request."""

from __future__ import annotations

import json
from pathlib import Path

from tests.serve.real_router import chat, real_router
from tests.serve.standin_sglang import StandinServer, StandinState

PREFIX = " ".join(f"shared-context-word-{i}" for i in range(200))  # a long system-prompt-like prefix


def test_registration_reads_each_workers_own_answers(tmp_path: Path) -> None:
    state = StandinState(model="glm-served", model_path="zai-org/GLM-5.3-Flash")
    with (
        StandinServer(state) as a,
        real_router(["--worker-urls", a.url], expect=[a.url], log=tmp_path / "r.log") as r,
    ):
        (worker,) = r.workers()
    assert worker["worker_type"] == "regular"
    assert worker["is_healthy"]
    assert worker["model_id"] == "glm-served"  # served_model_name from /server_info
    assert worker["metadata"]["model_path"] == "zai-org/GLM-5.3-Flash"
    assert {"/server_info", "/model_info"} <= set(a.state.paths())


def test_round_robin_spreads_requests_over_both_workers(tmp_path: Path) -> None:
    with StandinServer() as a, StandinServer() as b:
        args = ["--worker-urls", a.url, b.url, "--policy", "round_robin"]
        with real_router(args, expect=[a.url, b.url], log=tmp_path / "router.log") as router:
            codes = [chat(router.url, f"question {i}")[0] for i in range(8)]
    assert codes == [200] * 8
    assert [len(a.state.served_log), len(b.state.served_log)] == [4, 4]
    asked = sorted(s.prompt for s in a.state.served_log + b.state.served_log)
    assert len(set(asked)) == 8  # each request reached exactly one worker


def test_cache_aware_keeps_a_shared_prefix_on_one_worker(tmp_path: Path) -> None:
    with StandinServer() as a, StandinServer() as b:
        args = ["--worker-urls", a.url, b.url, "--policy", "cache_aware"]
        with real_router(args, expect=[a.url, b.url], log=tmp_path / "router.log") as router:
            codes = [chat(router.url, f"{PREFIX} question {i}")[0] for i in range(6)]
    assert codes == [200] * 6
    counts = sorted([len(a.state.served_log), len(b.state.served_log)])
    assert counts == [0, 6], counts


def test_pd_one_prefill_two_decodes_share_each_request_by_bootstrap_room(tmp_path: Path) -> None:
    prefill = StandinState(disaggregation="prefill", bootstrap_port=0)
    decodes = [StandinState(disaggregation="decode"), StandinState(disaggregation="decode")]
    with StandinServer(prefill) as p, StandinServer(decodes[0]) as d1, StandinServer(decodes[1]) as d2:
        args = ["--pd-disaggregation", "--prefill", p.url, str(prefill.bootstrap_port),
                "--decode", d1.url, "--decode", d2.url, "--policy", "round_robin"]  # fmt: skip
        with real_router(args, expect=[p.url, d1.url, d2.url], log=tmp_path / "router.log") as router:
            types = {w["url"]: w["worker_type"] for w in router.workers()}
            answers = [
                chat(router.url, f"pd question {i}", max_tokens=5, stream=i % 2 == 1) for i in range(6)
            ]
    assert types == {p.url: "prefill", d1.url: "decode", d2.url: "decode"}
    assert [code for code, _ in answers] == [200] * 6
    assert json.loads(answers[0][1])["choices"][0]["message"]["content"] == "w0 w1 w2 w3 w4"  # decode's
    rooms = {s.bootstrap_room: s for s in prefill.served_log}
    decoded = [s for d in decodes for s in d.served_log]
    assert len(rooms) == 6
    assert None not in rooms
    assert sorted(s.bootstrap_room for s in decoded) == sorted(rooms)  # each room: one prefill, one decode
    assert all(rooms[s.bootstrap_room].prompt == s.prompt for s in decoded)
    assert all(d.served_log for d in decodes)  # round robin over both decodes
    # prefill counted the prompts (and its one first token each), the decodes the output tokens
    assert prefill.counters["sglang:prompt_tokens_total"] == sum(s.prompt_tokens for s in rooms.values())
    assert prefill.counters["sglang:generation_tokens_total"] == 6
    assert sum(d.counters.get("sglang:generation_tokens_total", 0) for d in decodes) == 6 * 5
    assert all("sglang:prompt_tokens_total" not in d.counters for d in decodes)


def test_a_dead_worker_is_marked_unhealthy_and_the_survivor_serves(tmp_path: Path) -> None:
    with StandinServer() as a, StandinServer() as b:
        args = ["--worker-urls", a.url, b.url, "--policy", "round_robin",
                "--health-check-interval-secs", "1", "--health-failure-threshold", "1"]  # fmt: skip
        with real_router(args, expect=[a.url, b.url], log=tmp_path / "router.log") as router:
            b.stop()
            # before the health check notices, the router's retries move b's share to a
            right_after = [chat(router.url, f"after kill {i}")[0] for i in range(4)]
            workers = router.wait_for({a.url}, timeout=15)
            tried_b = router.log_text().count(f"worker_url={b.url}")
            later = [chat(router.url, f"later {i}")[0] for i in range(4)]
            tried_b_later = router.log_text().count(f"worker_url={b.url}")
    assert right_after == [200] * 4
    assert later == [200] * 4
    # /workers still lists the dead worker, unhealthy: it is not removed
    assert {w["url"]: w["is_healthy"] for w in workers} == {a.url: True, b.url: False}
    assert tried_b > 0  # the first requests did try b
    assert tried_b_later == tried_b  # once unhealthy, b is sent nothing
    assert len(a.state.served_log) == 8
    assert not b.state.served_log
