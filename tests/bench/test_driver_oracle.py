"""End to end: the driver runs the REAL sglang 0.5.23 bench_serving (oracle venv) against the
stand-in server on 127.0.0.1, and reads the JSONL it really writes. A few short requests per run."""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest

from flashfleet.bench.driver import run_profile
from flashfleet.bench.fingerprint import Deployment, RecipeSelection
from flashfleet.bench.profiles import BENCH_MODULES, get_profile
from flashfleet.bench.servers import Server
from flashfleet.bench.session import BenchRequest, bench
from flashfleet.bench.summary import METRICS, REQUIRED_KEYS, read_jsonl
from flashfleet.recipes import render
from tests.bench.conftest import ORACLE, tiny
from tests.bench.fakes import FakeCluster
from tests.bench.test_profiles import serving_source


def written_result_keys() -> set[str]:
    """The keys of the `result = {...}` dict that serving.py dumps to --output-file."""
    for node in ast.walk(ast.parse(serving_source())):
        if (
            isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "result"
            and isinstance(node.value, ast.Dict)
        ):  # fmt: skip
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("no result dict in serving.py")


def test_every_key_the_summary_reads_is_one_serving_py_writes():
    keys = written_result_keys()
    assert set(REQUIRED_KEYS) <= keys
    read = {f"{s}_{m}" for m in METRICS for s in ("mean", "median", "std", "p90", "p95", "p99")}
    assert read <= keys | {"std_e2e_latency_ms"}
    assert {"concurrency", "total_throughput", "tag"} <= keys


@pytest.mark.parametrize("module", BENCH_MODULES)
def test_real_bench_serving_native_backend(standin, oracle_runner, module):
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    run = run_profile(profile, standin.url, oracle_runner, python=str(ORACLE), module=module)
    assert run.ok, [(lv.error, lv.completed.log[-2000:]) for lv in run.levels]
    assert [lv.concurrency for lv in run.summaries] == [1, 2]

    # what bench_serving really sent: warm-up + 4 measured requests per level, 8 new tokens each
    generate = [b for p, b in standin.state.requests if p == "/generate"]
    assert len(generate) == 2 * (1 + 4)
    assert {b["sampling_params"]["max_new_tokens"] for b in generate} == {8}
    assert all(b["stream"] for b in generate)

    for lv in run.levels:
        record = read_jsonl(lv.completed.jsonl)[-1]
        assert set(REQUIRED_KEYS) <= set(record)
        assert set(record) <= written_result_keys()  # no --output-details: exactly the result dict
        assert record["tag"] == f"sweep/c{lv.concurrency}"
        s = lv.summary
        assert s is not None
        assert (s.completed, s.num_prompts, s.total_output_tokens) == (4, 4, 32)
        # the stand-in waits 20 ms before the first token and 2 ms between tokens
        assert 20 <= s.ttft_ms.median < 2000
        # chunks can arrive bunched (a busy machine delays the first and hurries the rest), so the
        # per-token figures have no floor of their own; the whole request cannot beat its sleeps
        assert 0 < s.tpot_ms.median < 200
        assert 0 < s.itl_ms.mean < 200
        assert s.ttft_ms.mean + 7 * s.tpot_ms.mean >= 20 + 7 * 2 - 1  # means add up per request
        assert s.ttft_ms.p99 >= s.ttft_ms.median
        assert s.output_throughput == pytest.approx(32 / s.duration_s, rel=1e-6)
    if module == "sglang.bench_serving":
        assert "deprecated" in run.levels[0].completed.log


def test_real_bench_serving_chat_backend(standin, oracle_runner):
    profile = replace(tiny(get_profile("chat-1k1k"), concurrency=(2,), requests=4), backend="sglang-oai-chat")
    run = run_profile(profile, standin.url, oracle_runner, python=str(ORACLE))
    assert run.ok, run.levels[0].completed.log[-2000:]
    chats = [b for p, b in standin.state.requests if p == "/v1/chat/completions"]
    assert len(chats) == 5
    assert {b["max_completion_tokens"] for b in chats} == {8}
    s = run.summaries[0]
    assert (s.completed, s.total_output_tokens, s.backend) == (4, 32, "sglang-oai-chat")
    assert s.ttft_ms.median >= 20


def test_a_failing_server_fails_the_level_and_keeps_the_log(standin, oracle_runner):
    standin.state.fail_generation = True
    profile = tiny(get_profile("chat-1k1k"), concurrency=(1,), requests=2)
    run = run_profile(profile, standin.url, oracle_runner, python=str(ORACLE))
    assert not run.ok
    # the level's warm-up run (its own seed, no warm-up of its own) fails first; nothing is measured
    assert run.failures[0].error.startswith("warm-up failed: bench_serving exited with 1: ")
    assert "output_file='warmup.jsonl'" in run.failures[0].completed.log
    assert [p for p in standin.state.paths() if p == "/generate"] == ["/generate"]  # the one warm-up prompt


def test_bench_session_end_to_end_writes_results_and_tears_down(standin, oracle_runner, tmp_path):
    torn: list[str] = []
    deployment = Deployment(
        stack="h200-ll",
        recipe=RecipeSelection("h200", "low-latency"),
        image="lmsysorg/sglang:v0.5.23",
        image_digest="sha256:" + "ab" * 32,
        instance_type="p5en.48xlarge",
        node_count=1,
        hourly_usd_per_node=60.0,
        node_versions={"node-0": {"nvidia_driver": "580.95.05", "cuda": "13.0", "sglang": "0.5.23"}},
    )
    cluster = FakeCluster(
        endpoint_of=lambda stack: standin.url,
        teardown_of=torn.append,
        runner_of=lambda stack: oracle_runner,
        deployment_of=lambda stack: deployment,
    )
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    # the recipe's server is the stand-in here (its readiness is asked through the runner)
    request = BenchRequest(
        stack="h200-ll", profile=profile, results_root=tmp_path, destroy=True, python=str(ORACLE),
        servers=(Server("server", standin.url),),
    )  # fmt: skip
    outcome = bench(request, cluster, log=lambda line: None)

    assert torn == ["h200-ll"]
    assert outcome.exit_code == 0
    assert {"/health", "/server_info"} <= set(standin.state.paths())  # asked before the first level
    run_dir = outcome.run_dir
    assert run_dir.parent == tmp_path / "h200-ll"
    raw = sorted(p.name for p in (run_dir / "raw").iterdir())
    assert raw == [
        f"c000{c}.{ext}" for c in (1, 2) for ext in ("argv.json", "jsonl", "log", "warmup.argv.json")
    ]
    assert read_jsonl((run_dir / "raw" / "c0002.jsonl").read_text())[0]["max_concurrency"] == 2

    summary = json.loads((run_dir / "summary.json").read_text())
    assert [lv["concurrency"] for lv in summary["levels"]] == [1, 2]
    assert summary["cost"]["hourly_usd"] == 60.0
    assert summary["cost"]["per_mtok_output_usd"] > 0
    assert summary["levels"][1]["cost_per_mtok_output_usd"] == pytest.approx(
        60.0 / (summary["levels"][1]["output_throughput"] * 3600 / 1e6)
    )

    fp = json.loads((run_dir / "fingerprint.json").read_text())
    recipe = render("h200", "low-latency")
    assert fp["recipe"]["badge"] == recipe.badge
    assert [p["argv"] for p in fp["recipe"]["processes"]] == [list(p.argv) for p in recipe.start_order()]
    assert fp["image_digest"] == deployment.image_digest
    assert fp["node_versions"]["node-0"]["nvidia_driver"] == "580.95.05"
    assert (fp["instance_type"], fp["node_count"]) == ("p5en.48xlarge", 1)
    assert fp["benchmark"]["argv"][0][:3] == [str(ORACLE), "-m", "sglang.benchmark.serving"]

    report = (run_dir / "report.md").read_text()
    assert "| 1 | 4/4 |" in report
    assert "| 2 | 4/4 |" in report
    assert recipe.badge in report
    for png in ("throughput_latency.png", "latency_percentiles.png"):
        assert (run_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in report


def test_real_bench_serving_sends_no_prompt_twice_across_levels_and_runs(standin, oracle_runner):
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    for run_id in ("run-one", "run-two"):  # fixed ids: the same prompts every time this runs
        run = run_profile(profile, standin.url, oracle_runner, python=str(ORACLE), run_id=run_id)
        assert run.ok, [(lv.error, lv.completed.log[-2000:]) for lv in run.levels]
    sent = [json.dumps(b["text"]) for p, b in standin.state.requests if p == "/generate"]
    assert len(sent) == 2 * 2 * (1 + 4)  # per level: its warm-up run's one request, four measured
    assert len(set(sent)) == len(sent)


def test_real_bench_serving_flushes_the_shared_prefix_profile_after_its_warm_up(standin, oracle_runner):
    profile = tiny(get_profile("agentic-long"), concurrency=(2,), requests=4)
    run = run_profile(profile, standin.url, oracle_runner, python=str(ORACLE), run_id="abc")
    assert run.ok, run.levels[0].completed.log[-2000:]
    paths = [
        p.partition("?")[0]
        for p in standin.state.paths()
        if p.partition("?")[0] in ("/generate", "/flush_cache")
    ]
    # the warm-up (one request), then the flush, then the measured requests (2 groups x 2 prompts)
    assert paths == ["/generate", "/flush_cache", *["/generate"] * 4]
