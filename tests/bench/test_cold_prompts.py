"""Cold by construction: no level or repeated run sends a prompt an earlier one sent.

The load generator here is a model of bench_serving's random-ids path, transcribed from sglang
0.5.23 (serving.py seeds `random` and `numpy.random` with --seed, then warms up by sending
input_requests[0] --warmup-requests times, flushes when --flush-cache is given, and sends every
prompt once; datasets/random.py draws the lengths with compute_random_lens and each prompt as
consecutive token ids from a random offset). It sends every prompt to the stand-in server, which
records what it received. (The real bench_serving runs against the stand-in in
test_driver_oracle.py, where the oracle interpreter is installed.)
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections import Counter

import numpy as np

from flashfleet.bench.argv import WARMUP_OUTPUT_NAME
from flashfleet.bench.driver import run_profile
from flashfleet.bench.method import CACHE_METHOD, method_of
from flashfleet.bench.profiles import get_profile
from flashfleet.bench.runner import Completed, Invocation, LocalRunner
from flashfleet.bench.servers import Server
from flashfleet.bench.session import BenchRequest, bench
from tests.bench.conftest import tiny
from tests.bench.fakes import FakeCluster, curve, jsonl

VOCAB = 151_552  # a vocabulary of a real tokenizer's size: how many offsets a prompt can start from


def _flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def _random_ids(seed: int, n: int, input_len: int, output_len: int, ratio: float) -> list[tuple[str, int]]:
    np.random.seed(seed)
    lens_in = np.random.randint(max(int(input_len * ratio), 1), input_len + 1, size=n).tolist()
    lens_out = np.random.randint(max(int(output_len * ratio), 1), output_len + 1, size=n).tolist()
    offsets = np.random.randint(0, VOCAB, size=n)
    return [
        (" ".join(f"w{(offsets[i] + i + j) % VOCAB}" for j in range(lens_in[i])), lens_out[i])
        for i in range(n)
    ]


class ModelBenchServing:
    """Runs an invocation the way bench_serving would, against the server at --base-url."""

    def __init__(self) -> None:
        self.invocations: list[list[str]] = []

    def __call__(self, invocation: Invocation) -> Completed:
        argv = list(invocation.argv)
        self.invocations.append(argv)
        base = str(_flag(argv, "--base-url"))
        n = int(str(_flag(argv, "--num-prompts")))
        prompts = _random_ids(
            int(str(_flag(argv, "--seed", "42"))), n,
            int(str(_flag(argv, "--random-input-len"))), int(str(_flag(argv, "--random-output-len"))),
            float(str(_flag(argv, "--random-range-ratio", "0.0"))),
        )  # fmt: skip
        first, first_len = prompts[0]
        for _ in range(int(str(_flag(argv, "--warmup-requests", "1")))):
            self._post(
                base, "/generate", {"text": first, "sampling_params": {"max_new_tokens": min(first_len, 32)}}
            )
        if "--flush-cache" in argv:
            self._post(base, "/flush_cache", {})
        for text, out_len in prompts:
            self._post(base, "/generate", {"text": text, "sampling_params": {"max_new_tokens": out_len}})
        concurrency = int(str(_flag(argv, "--max-concurrency")))
        return Completed(0, "ok\n", jsonl(curve(concurrency, completed=n)))

    @staticmethod
    def _post(base: str, path: str, body: dict[str, object]) -> None:
        req = urllib.request.Request(
            base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()


def _prompts(standin) -> list[str]:
    return [body["text"] for path, body in standin.state.requests if path == "/generate"]


def _old_argv(runner: ModelBenchServing, warmups: int):
    """The driver's argv as it was before seeds: no --seed (bench_serving's 42), no separate
    warm-up run, bench_serving's own warm-up of the profile's size."""

    def run(invocation: Invocation) -> Completed:
        if invocation.output_name == WARMUP_OUTPUT_NAME:
            return Completed(0, "", jsonl(curve(1, completed=1)))  # the old argv had no such run
        argv = list(invocation.argv)
        i = argv.index("--seed")
        del argv[i : i + 2]
        argv[argv.index("--warmup-requests") + 1] = str(warmups)
        return runner(Invocation(tuple(argv), invocation.output_name, invocation.timeout_s))

    return run


def test_a_sweep_and_its_repeat_send_no_prompt_twice(standin):
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    runner = ModelBenchServing()
    first = run_profile(profile, standin.url, runner, run_id="run-one")
    again = run_profile(profile, standin.url, runner, run_id="run-two")
    assert first.ok
    assert again.ok

    sent = _prompts(standin)
    # two runs x two levels x (one warm-up request + four measured)
    assert len(sent) == 2 * 2 * (1 + 4)
    assert [p for p, n in Counter(sent).items() if n > 1] == []
    # each level's seed is in the argv it ran with, and no two runs or levels share one
    seeds = [int(str(_flag(argv, "--seed"))) for argv in runner.invocations]
    assert len(set(seeds)) == len(seeds) == 8


def test_the_same_sweep_with_the_old_argv_repeats_prompts(standin):
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    runner = ModelBenchServing()
    run_profile(profile, standin.url, _old_argv(runner, warmups=1), run_id="run-one")
    run_profile(profile, standin.url, _old_argv(runner, warmups=1), run_id="run-two")

    sent = _prompts(standin)
    assert len(sent) == 2 * 2 * (1 + 4)
    repeated = {p: n for p, n in Counter(sent).items() if n > 1}
    # the same four prompts at every level of every run, the first one also as every warm-up
    assert len(repeated) == 4
    assert sorted(repeated.values()) == [4, 4, 4, 8]


def test_the_seeds_the_method_records_are_the_ones_sent():
    profile = tiny(get_profile("sweep"), concurrency=(1, 2, 4), requests=4)
    runner = ModelBenchServingNoServer()
    run = run_profile(profile, "http://127.0.0.1:9", runner, run_id="abc")
    method = method_of(profile, module="sglang.benchmark.serving", client_version="0.5.23", run_id="abc")
    assert method["cache_method"] == CACHE_METHOD["cold"]
    assert method["run_id"] == "abc"
    for level, recorded in zip(run.levels, method["seeds"], strict=True):
        assert recorded["concurrency"] == level.concurrency
        assert _flag(list(level.argv), "--seed") == str(recorded["measured"])
        assert level.warmup_argv is not None
        assert _flag(list(level.warmup_argv), "--seed") == str(recorded["warmup"])
        assert _flag(list(level.argv), "--warmup-requests") == "0"  # warmed up by its own run


class ModelBenchServingNoServer(ModelBenchServing):
    def _post(self, base: str, path: str, body: dict[str, object]) -> None:  # type: ignore[override]
        pass


def test_the_shared_prefix_profile_flushes_after_its_own_warm_up():
    profile = tiny(get_profile("agentic-long"), concurrency=(2,), requests=4)
    run = run_profile(profile, "http://127.0.0.1:9", lambda inv: Completed(0, "", ""), run_id="abc")
    (level,) = run.levels
    assert level.warmup_argv is None
    assert "--flush-cache" in level.argv
    assert _flag(list(level.argv), "--warmup-requests") == "1"
    method = method_of(profile, module="sglang.benchmark.serving", client_version="0.5.23", run_id="abc")
    assert method["cache_method"].startswith("shared prefix on purpose")


def test_a_failed_warm_up_fails_its_level_and_sends_no_measured_request():
    profile = tiny(get_profile("sweep"), concurrency=(1, 2), requests=4)
    measured: list[int] = []

    def runner(inv: Invocation) -> Completed:
        concurrency = int(str(_flag(list(inv.argv), "--max-concurrency")))
        if inv.output_name == WARMUP_OUTPUT_NAME:
            if concurrency == 1:
                return Completed(1, "Traceback\nConnectionError: refused\n", "")
            return Completed(0, "", jsonl(curve(concurrency, completed=1)))
        measured.append(concurrency)
        return Completed(0, "", jsonl(curve(concurrency, completed=4)))

    run = run_profile(profile, "http://127.0.0.1:9", runner, run_id="abc")
    assert measured == [2]  # a level that was not warmed up is not measured
    assert [(f.concurrency, f.error) for f in run.failures] == [
        (1, "warm-up failed: bench_serving exited with 1: ConnectionError: refused")
    ]
    assert not run.ok


class ModelOnNode(ModelBenchServing):
    """The model load generator as a cluster's runner: the probe and the /metrics fetches it is
    handed (``python -c``) run for real, here."""

    def __init__(self) -> None:
        super().__init__()
        self._here = LocalRunner()

    def __call__(self, invocation: Invocation) -> Completed:
        if invocation.argv[1] == "-c":
            return self._here(invocation)
        return super().__call__(invocation)


def _bench_twice(tmp_path, standin, runner) -> list[dict]:
    summaries = []
    for run_id in ("run-one", "run-two"):
        request = BenchRequest(
            stack="stk", profile=tiny(get_profile("sweep"), concurrency=(1, 2), requests=4),
            results_root=tmp_path, endpoint=standin.url, python=sys.executable,
            servers=(Server("server", standin.url),), run_id=run_id,
        )  # fmt: skip
        outcome = bench(request, FakeCluster(runner_of=lambda stack: runner), lambda line: None)
        summary = json.loads((outcome.run_dir / "summary.json").read_text())
        summaries.append({**summary, "report.md": (outcome.run_dir / "report.md").read_text()})
    return summaries


def test_the_servers_counters_show_no_cache_hit_in_a_cold_sweep_or_its_repeat(tmp_path, standin):
    summaries = _bench_twice(tmp_path, standin, ModelOnNode())
    for summary in summaries:
        assert summary["warnings"] == []
        for level in summary["levels"]:
            server = level["server"]
            assert server["prompt_tokens"] == 4 * 16  # four prompts of 16 words (tokens) each
            assert server["cached_tokens"] == 0
            assert server["prefix_cache_hit_rate"] == 0.0
            assert server["servers"][standin.url]["num_requests_total"] == 4
        assert "| 1 | 64 | 0 | 0.0% |" in summary["report.md"]
        assert "**warning**" not in summary["report.md"]


def test_the_servers_counters_show_the_old_argvs_hits_and_warn(tmp_path, standin):
    model = ModelOnNode()
    old = _old_argv(model, warmups=1)

    def runner(invocation: Invocation) -> Completed:
        return model(invocation) if invocation.argv[1] == "-c" else old(invocation)

    first, second = _bench_twice(tmp_path, standin, runner)
    rates = [lv["server"]["prefix_cache_hit_rate"] for s in (first, second) for lv in s["levels"]]
    # the first level: five prompts (its warm-up's included), one of them the warm-up's again;
    # every later level re-sends all of them
    assert rates == [0.2, 1.0, 1.0, 1.0]
    assert len(first["warnings"]) == 2
    assert first["warnings"][0].startswith(
        "concurrency 1: 20.0% of its prompt tokens came from the prefix cache"
    )


def test_a_warm_up_in_which_no_request_succeeded_fails_its_level():
    profile = tiny(get_profile("sweep"), concurrency=(1,), requests=4)

    def runner(inv: Invocation) -> Completed:
        if inv.output_name == WARMUP_OUTPUT_NAME:  # bench_serving exits 0 and counts no success
            return Completed(0, "", jsonl(curve(1, completed=0)))
        return Completed(0, "", jsonl(curve(1, completed=4)))

    run = run_profile(profile, "http://127.0.0.1:9", runner, run_id="abc")
    assert [(f.concurrency, f.error) for f in run.failures] == [
        (1, "warm-up failed: no warm-up request succeeded")
    ]
