"""Canned bench_serving results, a fake runner and a fake cluster, for tests that need no server."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from flashfleet.bench.argv import WARMUP_OUTPUT_NAME
from flashfleet.bench.errors import BenchSetupError
from flashfleet.bench.fingerprint import Deployment
from flashfleet.bench.runner import Completed, Invocation, LocalRunner, Runner

STATS = ("mean", "median", "std", "p90", "p95", "p99")


def record(
    concurrency: int, *, throughput: float, ttft: float, tpot: float, completed: int = 8
) -> dict[str, object]:
    """One result line with the keys sglang 0.5.23 writes (values made up, shapes real)."""
    out: dict[str, object] = {
        "tag": None, "backend": "sglang", "dataset_name": "random-ids", "request_rate": float("inf"),
        "max_concurrency": concurrency, "sharegpt_output_len": None, "random_input_len": 1024,
        "random_output_len": 1024, "random_range_ratio": 1.0, "server_info": None,
        "duration": 10.0, "completed": completed, "total_input_tokens": completed * 1024,
        "total_input_text_tokens": completed * 1024, "total_input_vision_tokens": 0,
        "total_output_tokens": int(throughput * 10), "total_output_tokens_retokenized": int(throughput * 10),
        "request_throughput": completed / 10, "input_throughput": completed * 102.4,
        "output_throughput": throughput, "total_throughput": throughput + completed * 102.4,
        "concurrency": concurrency * 0.95, "accept_length": None, "max_output_tokens_per_s": throughput * 1.2,
        "max_concurrent_requests": concurrency,
    }  # fmt: skip
    for metric, base in (
        ("ttft_ms", ttft),
        ("tpot_ms", tpot),
        ("itl_ms", tpot),
        ("e2e_latency_ms", ttft + 1023 * tpot),
    ):
        for i, stat in enumerate(STATS):
            out[f"{stat}_{metric}"] = base * (1 + 0.1 * i)
    return out


def jsonl(*records: dict[str, object]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)  # json writes inf as Infinity, like sglang


def curve(concurrency: int, completed: int = 8) -> dict[str, object]:
    """A plausible throughput/latency curve: more users, more tokens/s, slower per user."""
    return record(
        concurrency,
        throughput=100.0 * concurrency**0.8,
        ttft=50.0 + concurrency,
        tpot=10.0 + concurrency / 8,
        completed=completed,
    )


class FakeRunner:
    """Answers each benchmark invocation from ``answer(concurrency)`` (by default a result with
    every requested prompt completed), and the load generator's version probe with
    ``client_version``; records the benchmark invocations it was asked to run (a cold level's
    separate warm-up run apart, in ``warmups``)."""

    def __init__(
        self, answer: Callable[[int], Completed] | None = None, client_version: str = "0.5.23"
    ) -> None:
        self.calls: list[Invocation] = []
        self.probes: list[Invocation] = []
        self.warmups: list[Invocation] = []
        self._answer = answer
        self.client_version = client_version

    def __call__(self, invocation: Invocation) -> Completed:
        argv = list(invocation.argv)
        if argv[1] == "-c":
            self.probes.append(invocation)
            return Completed(0, f"flashfleet-client-version {self.client_version}\n", "")
        if invocation.output_name == WARMUP_OUTPUT_NAME:
            self.warmups.append(invocation)
            return Completed(0, "warm-up ok\n", jsonl(curve(1, completed=1)))
        self.calls.append(invocation)
        concurrency = int(argv[argv.index("--max-concurrency") + 1])
        if self._answer is not None:
            return self._answer(concurrency)
        prompts = int(argv[argv.index("--num-prompts") + 1])
        return Completed(0, "ok\n", jsonl(curve(concurrency, completed=prompts)))


@dataclass(frozen=True)
class FakeCluster:
    """A stack's cluster (flashfleet.bench.cluster_protocol.Cluster) answered by the test; an
    answer it is not given is the refusal or the default of a stack without outputs."""

    endpoint_of: Callable[[str], str] | None = None
    teardown_of: Callable[[str], None] | None = None
    runner_of: Callable[[str], Runner] | None = None
    deployment_of: Callable[[str], Deployment] | None = None

    def endpoint(self, stack: str) -> str:
        if self.endpoint_of is None:
            raise BenchSetupError(f"no --endpoint given and stack {stack} has no endpoint output")
        return self.endpoint_of(stack)

    def teardown(self, stack: str) -> None:
        if self.teardown_of is None:
            raise AssertionError(f"stack {stack} torn down, but the test gave no teardown")
        self.teardown_of(stack)

    def runner(self, stack: str) -> Runner:
        return LocalRunner() if self.runner_of is None else self.runner_of(stack)

    def deployment(self, stack: str) -> Deployment:
        return Deployment(stack=stack) if self.deployment_of is None else self.deployment_of(stack)
