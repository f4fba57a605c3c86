"""What a benchmark run cost, from the instance's hourly price (an input: the catalog knows it).

The run's cost is the cluster's hourly price over the driver's wall clock (warm-up and
ready checks included, bring-up not). Cost per million output tokens is given per level at
that level's measured output throughput (the steady-state price of serving at that
concurrency) and for the run as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from flashfleet.bench.summary import LevelSummary


@dataclass(frozen=True)
class Cost:
    hourly_usd_per_node: float
    node_count: int
    wall_s: float
    output_tokens: int

    @property
    def hourly_usd(self) -> float:
        return self.hourly_usd_per_node * self.node_count

    @property
    def run_usd(self) -> float:
        return self.hourly_usd * self.wall_s / 3600.0

    @property
    def per_mtok_output_usd(self) -> float | None:
        if self.output_tokens <= 0:
            return None
        return self.run_usd / (self.output_tokens / 1e6)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "hourly_usd": self.hourly_usd,
            "run_usd": self.run_usd,
            "per_mtok_output_usd": self.per_mtok_output_usd,
        }


def level_cost_per_mtok(hourly_usd: float, level: LevelSummary) -> float | None:
    """USD per million output tokens while serving at this level's output throughput."""
    if level.output_throughput <= 0:
        return None
    return hourly_usd / (level.output_throughput * 3600.0 / 1e6)


def run_cost(
    hourly_usd_per_node: float | None, node_count: int, wall_s: float, levels: Sequence[LevelSummary]
) -> Cost | None:
    if hourly_usd_per_node is None:
        return None
    if hourly_usd_per_node < 0 or node_count < 1:
        raise ValueError("hourly price must be >= 0 and node count >= 1")
    return Cost(hourly_usd_per_node, node_count, wall_s, sum(lv.total_output_tokens for lv in levels))
