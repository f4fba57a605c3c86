"""bench_serving's JSONL result lines -> one typed summary row per concurrency level.

Keys are exactly those sglang 0.5.23's `sglang/benchmark/serving.py` writes (one JSON object per
run, appended to --output-file). Python's json reads its `Infinity` (request_rate inf) and `NaN`
(latency stats of a run whose requests all failed) as floats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms")
STATS = ("mean", "median", "std", "p90", "p95", "p99")

# Without these a line is not a bench_serving result (or the format changed under us).
REQUIRED_KEYS = (
    "backend", "dataset_name", "max_concurrency", "duration", "completed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "input_throughput",
    "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
    "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
)  # fmt: skip


class ResultFormatError(ValueError):
    """A line that is not a bench_serving result."""


def _number(value: Any) -> float | None:
    """A finite float, or None for absent/NaN (sglang writes NaN when no request succeeded)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


_SHAPE = ConfigDict(extra="forbid", frozen=True)


class Percentiles(BaseModel):
    model_config = _SHAPE

    mean: float | None
    median: float | None
    std: float | None
    p90: float | None
    p95: float | None
    p99: float | None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], metric: str) -> Percentiles:
        return cls(**{stat: _number(record.get(f"{stat}_{metric}")) for stat in STATS})


class LevelSummary(BaseModel):
    """One bench_serving run: one concurrency level of a profile (stored as dumped, read back
    with model_validate)."""

    model_config = _SHAPE

    concurrency: int | None  # --max-concurrency (None: unlimited)
    num_prompts: int | None  # what the driver asked for, when known
    completed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    input_throughput: float
    output_throughput: float
    total_throughput: float | None
    mean_concurrency: float | None  # measured: sum of request latencies / duration
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: Percentiles
    e2e_latency_ms: Percentiles
    backend: str
    dataset: str
    tag: str | None
    # Agentic figure of merit: 1 / p90 over requests of (e2e latency / output tokens), tokens/s
    # per user at the slow tail; needs --output-details (per-request lengths and timings).
    agentic_rate: float | None = None
    # Tokens of the text that really came back. sglang's native client counts the REQUESTED
    # length for a request that streamed no text at all, so total_output_tokens alone can lie.
    total_output_tokens_retokenized: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success_ratio(self) -> float | None:
        if not self.num_prompts:
            return None
        return self.completed / self.num_prompts


def parse_record(record: Mapping[str, Any], *, num_prompts: int | None = None) -> LevelSummary:
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ResultFormatError(f"not a bench_serving result line: missing {', '.join(missing)}")
    max_conc = record["max_concurrency"]
    return LevelSummary(
        concurrency=int(max_conc) if max_conc is not None else None,
        num_prompts=num_prompts,
        completed=int(record["completed"]),
        duration_s=float(record["duration"]),
        total_input_tokens=int(record["total_input_tokens"]),
        total_output_tokens=int(record["total_output_tokens"]),
        request_throughput=float(record["request_throughput"]),
        input_throughput=float(record["input_throughput"]),
        output_throughput=float(record["output_throughput"]),
        total_throughput=_number(record.get("total_throughput")),
        mean_concurrency=_number(record.get("concurrency")),
        ttft_ms=Percentiles.from_record(record, "ttft_ms"),
        tpot_ms=Percentiles.from_record(record, "tpot_ms"),
        itl_ms=Percentiles.from_record(record, "itl_ms"),
        e2e_latency_ms=Percentiles.from_record(record, "e2e_latency_ms"),
        backend=str(record["backend"]),
        dataset=str(record["dataset_name"]),
        tag=record.get("tag"),
        agentic_rate=agentic_rate(record),
        total_output_tokens_retokenized=_int_or_none(record.get("total_output_tokens_retokenized")),
    )


def _int_or_none(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def agentic_rate(record: Mapping[str, Any]) -> float | None:
    """1 / p90(e2e / output length) from --output-details (e2e = TTFT + the inter-token gaps)."""
    lens, ttfts, itls = record.get("output_lens"), record.get("ttfts"), record.get("itls")
    if not (isinstance(lens, list) and isinstance(ttfts, list) and isinstance(itls, list)):
        return None
    ratios = sorted(
        (ttft + sum(gaps)) / n
        for n, ttft, gaps in zip(lens, ttfts, itls, strict=False)
        if isinstance(n, int) and n > 0 and isinstance(ttft, int | float) and isinstance(gaps, list)
    )
    if not ratios:
        return None
    p90 = _percentile(ratios, 90)
    return 1.0 / p90 if p90 > 0 else None


def _percentile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) percentile of a sorted list, as bench_serving computes its own."""
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def read_jsonl(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL text (blank lines ignored)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise ResultFormatError(f"line {number}: not JSON ({err.msg})") from None
        if not isinstance(value, dict):
            raise ResultFormatError(f"line {number}: not a JSON object")
        out.append(value)
    return out


def sort_levels(levels: Iterable[LevelSummary]) -> list[LevelSummary]:
    return sorted(levels, key=lambda lv: math.inf if lv.concurrency is None else lv.concurrency)
