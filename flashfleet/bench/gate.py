"""The bench gate: a run's levels checked against its thresholds, so a benchmark can gate a
recipe change. The thresholds model is ``flashfleet.stack.thresholds.Thresholds``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, computed_field, model_serializer

from flashfleet.stack.thresholds import Thresholds

if TYPE_CHECKING:
    from flashfleet.bench.summary import LevelSummary


_SHAPE = ConfigDict(extra="forbid", frozen=True)


class Check(BaseModel):
    model_config = _SHAPE

    threshold: str
    limit: float
    concurrency: int | None
    actual: float | None  # None: the run did not measure it (fails the check)
    passed: bool

    def line(self) -> str:
        where = f"c={self.concurrency}" if self.concurrency is not None else "c=unlimited"
        shown = "not measured" if self.actual is None else f"{self.actual:.4g}"
        return f"{'PASS' if self.passed else 'FAIL'} {self.threshold} {where}: {shown} (limit {self.limit:g})"


class GateResult(BaseModel):
    model_config = _SHAPE

    checks: tuple[Check, ...]
    missing_levels: tuple[int, ...] = ()  # `concurrency` named a level the run does not have

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return not self.missing_levels and all(c.passed for c in self.checks)

    @model_serializer(mode="wrap")
    def _verdict_first(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # summary.json has always led the gate with its verdict (pydantic dumps computed fields last)
        out = handler(self)
        return {"passed": out.pop("passed"), **out}


def _actual(name: str, level: LevelSummary, cost_per_mtok: float | None) -> float | None:
    table: dict[str, float | None] = {
        "min_output_throughput": level.output_throughput,
        "min_request_throughput": level.request_throughput,
        "max_median_ttft_ms": level.ttft_ms.median,
        "max_p99_ttft_ms": level.ttft_ms.p99,
        "max_median_tpot_ms": level.tpot_ms.median,
        "max_p99_tpot_ms": level.tpot_ms.p99,
        "max_p99_itl_ms": level.itl_ms.p99,
        "min_success_ratio": level.success_ratio,
        "max_cost_per_mtok_usd": cost_per_mtok,
    }
    return table[name]


def evaluate(
    thresholds: Thresholds,
    levels: Sequence[LevelSummary],
    cost_per_mtok: Mapping[int | None, float | None] | None = None,
) -> GateResult:
    """Check every set threshold at every (or the selected) level."""
    selected = [lv for lv in levels if thresholds.concurrency in (None, lv.concurrency)]
    missing = (thresholds.concurrency,) if thresholds.concurrency is not None and not selected else ()
    checks = []
    for name, limit in thresholds.model_dump(exclude_none=True).items():
        if name == "concurrency":
            continue
        for level in selected:
            actual = _actual(name, level, (cost_per_mtok or {}).get(level.concurrency))
            ok = actual is not None and (actual >= limit if name.startswith("min_") else actual <= limit)
            checks.append(
                Check(threshold=name, limit=limit, concurrency=level.concurrency, actual=actual, passed=ok)
            )
    return GateResult(checks=tuple(checks), missing_levels=tuple(m for m in missing if m is not None))
