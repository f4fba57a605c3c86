"""The benchmark driver: one bench_serving run per concurrency level of a profile.

Every level runs even when an earlier one failed (a sweep that dies at 256 still has its curve
up to 128); the failures are kept with their logs and make the run fail. Every level draws its
prompts, and its warm-up's, from seeds of its own (flashfleet.bench.seeds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from flashfleet.bench.argv import OUTPUT_NAME, WARMUP_OUTPUT_NAME, bench_args, check_base_url, warmup_args
from flashfleet.bench.profiles import BENCH_MODULES, Profile
from flashfleet.bench.runner import Completed, Invocation, Runner, command
from flashfleet.bench.seeds import LevelSeeds, level_seeds, new_run_id
from flashfleet.bench.summary import LevelSummary, ResultFormatError, parse_record, read_jsonl
from flashfleet.bench.validity import log_tail, refusal


@dataclass(frozen=True)
class LevelRun:
    concurrency: int
    argv: tuple[str, ...]
    completed: Completed
    summary: LevelSummary | None
    error: str | None  # why this level counts as failed
    seeds: LevelSeeds | None = None
    warmup_argv: tuple[str, ...] | None = None  # a cold level's separate warm-up run

    @property
    def log_tail(self) -> list[str]:
        """The last meaningful lines of its console log: where the cause usually is."""
        return log_tail(self.completed.log)


@dataclass(frozen=True)
class BenchRun:
    profile: Profile
    endpoint: str
    started_at: datetime
    wall_s: float
    levels: tuple[LevelRun, ...] = field(default_factory=tuple)
    # Run-wide refusals found outside bench_serving (readiness, PD share): each fails the run.
    problems: tuple[str, ...] = ()
    run_id: str = ""  # what every seed of the run is derived from
    ready_wait_s: float | None = None  # how long the servers took to serve, before the first level
    # concurrency -> the servers' own counter deltas over its measured requests (level_counters)
    server_counters: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # worth a look, not a refusal (a cold level that hit the cache)

    @property
    def summaries(self) -> list[LevelSummary]:
        return [lv.summary for lv in self.levels if lv.summary is not None]

    @property
    def failures(self) -> list[LevelRun]:
        return [lv for lv in self.levels if lv.error is not None]

    @property
    def ok(self) -> bool:
        return bool(self.levels) and not self.failures and not self.problems


def _judge(concurrency: int, expected: int, done: Completed) -> tuple[LevelSummary | None, str | None]:
    summary = None
    try:
        records = read_jsonl(done.jsonl)
        if records:
            # bench_serving appends; the file is fresh per level, so the last line is this run
            summary = parse_record(records[-1], num_prompts=expected)
    except ResultFormatError as err:
        return None, f"unreadable result: {err}"
    if done.runner_error:
        return None, done.runner_error
    if done.timed_out:
        return summary, "timed out"
    if done.returncode != 0:
        tail = log_tail(done.log, 1)
        return summary, f"bench_serving exited with {done.returncode}" + (f": {tail[0]}" if tail else "")
    if summary is None:
        return None, "bench_serving wrote no result line"
    if summary.concurrency != concurrency:
        return summary, f"result is for max_concurrency={summary.concurrency}, not {concurrency}"
    return summary, refusal(summary, expected)


def run_profile(
    profile: Profile,
    endpoint: str,
    runner: Runner,
    *,
    python: str = "python3",
    module: str = BENCH_MODULES[0],
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] | None = None,
    run_id: str | None = None,
    between: Callable[[int, str], None] | None = None,
) -> BenchRun:
    """``between(concurrency, "before" | "after")`` is called around each level's measured
    requests (after its warm-up): where the servers' own counters are read."""
    if module not in BENCH_MODULES:
        raise ValueError(f"bench module must be one of {', '.join(BENCH_MODULES)}, not {module!r}")
    base_url = check_base_url(endpoint)
    run_id = run_id or new_run_id()
    started_at = datetime.now(UTC)
    t0 = clock()
    levels = []
    for seeds in level_seeds(run_id, profile.concurrency):
        concurrency = seeds.concurrency
        warm = warmup_args(profile, base_url, concurrency, seed=seeds.warmup)
        warm_argv = command(python, module, warm) if warm else None
        argv = command(python, module, bench_args(profile, base_url, concurrency, seed=seeds.measured))
        if log:
            requests = profile.expected_requests(concurrency)
            seed = seeds.measured
            log(f"bench {profile.name}: concurrency {concurrency}, {requests} requests (seed {seed})")
        warm_error = None
        if warm_argv is not None:
            warm_done = _invoke(runner, warm_argv, WARMUP_OUTPUT_NAME, profile.timeout_s)
            warm_error = _warmup_error(warm_done)
        error: str | None
        if warm_error is not None:
            done, summary, error = warm_done, None, f"warm-up failed: {warm_error}"
        else:
            if between:
                between(concurrency, "before")
            done = _invoke(runner, argv, OUTPUT_NAME, profile.timeout_s)
            if between:
                between(concurrency, "after")
            summary, error = _judge(concurrency, profile.expected_requests(concurrency), done)
        if log and error:
            log(f"bench {profile.name}: concurrency {concurrency} failed: {error}")
        levels.append(LevelRun(concurrency, argv, done, summary, error, seeds, warm_argv))
    return BenchRun(profile, base_url, started_at, clock() - t0, tuple(levels), run_id=run_id)


def _invoke(runner: Runner, argv: tuple[str, ...], output_name: str, timeout_s: float) -> Completed:
    try:
        return runner(Invocation(argv=argv, output_name=output_name, timeout_s=timeout_s))
    except Exception as err:  # a broken runner fails the level; the other levels still run
        return Completed(-1, "", "", runner_error=f"runner failed: {type(err).__name__}: {err}")


def _warmup_error(done: Completed) -> str | None:
    if done.runner_error:
        return done.runner_error
    if done.timed_out:
        return "timed out"
    if done.returncode != 0:
        tail = log_tail(done.log, 1)
        return f"bench_serving exited with {done.returncode}" + (f": {tail[0]}" if tail else "")
    try:  # as bench_serving's own warm-up: at least one request must have succeeded
        records = read_jsonl(done.jsonl)
    except ResultFormatError as err:
        return f"unreadable result: {err}"
    if not records:
        return "bench_serving wrote no result line"
    if not records[-1].get("completed"):
        return "no warm-up request succeeded"
    return None
