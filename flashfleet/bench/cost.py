"""What a benchmark run cost, from the instance's hourly price and where that price comes from.

A price is data with a source and a date (``SourcedPrice``): the catalog's public price, a
price the stack file sets (the user's own, which wins), or the price of a purchased Capacity
Block. No source, no price: the cost is then reported unknown, never guessed.

The run's cost is the cluster's hourly price over the driver's wall clock (warm-up and
ready checks included, bring-up not). Cost per million output tokens is given per level at
that level's measured output throughput (the steady-state price of serving at that
concurrency) and for the run as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, computed_field

from flashfleet.bench.summary import LevelSummary


@dataclass(frozen=True)
class SourcedPrice:
    """USD per instance-hour, with where it comes from and as of when."""

    usd_per_hour: float
    source: str
    date: str | None = None  # ISO date the price was read or bought at
    kind: str = "on-demand"  # on-demand | capacity-block | user

    def __post_init__(self) -> None:
        if not self.usd_per_hour > 0:
            raise ValueError(f"a price must be > 0 USD per hour, not {self.usd_per_hour!r}")
        if not self.source.strip():
            raise ValueError("a price needs a source")


def sourced_price(
    usd_per_hour: float, source: str, date: str | None = None, kind: str = "user"
) -> SourcedPrice:
    """A price to feed into a benchmark's cost (e.g. what a purchased Capacity Block cost per hour)."""
    return SourcedPrice(float(usd_per_hour), source, date, kind)


class Cost(BaseModel):
    """A run's cost; the figures that follow from the price are dumped after it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hourly_usd_per_node: float
    node_count: int
    wall_s: float
    output_tokens: int
    gpus: int | None = None  # GPUs the serving processes hold (tp x pp x cp per engine)
    router_hourly_usd: float = 0.0  # a cluster router's CPU node of its own, beside the GPU nodes
    price_source: str | None = None
    price_date: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hourly_usd(self) -> float:
        return self.hourly_usd_per_node * self.node_count + self.router_hourly_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_gpu_hour(self) -> float | None:
        return self.hourly_usd / self.gpus if self.gpus else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def run_usd(self) -> float:
        return self.hourly_usd * self.wall_s / 3600.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def per_mtok_output_usd(self) -> float | None:
        if self.output_tokens <= 0:
            return None
        return self.run_usd / (self.output_tokens / 1e6)


def level_cost_per_mtok(hourly_usd: float, level: LevelSummary) -> float | None:
    """USD per million output tokens while serving at this level's output throughput."""
    if level.output_throughput <= 0:
        return None
    return hourly_usd / (level.output_throughput * 3600.0 / 1e6)


def run_cost(
    hourly_usd_per_node: float | None,
    node_count: int,
    wall_s: float,
    levels: Sequence[LevelSummary],
    *,
    gpus: int | None = None,
    source: str | None = None,
    date: str | None = None,
    router_hourly_usd: float = 0.0,
) -> Cost | None:
    if hourly_usd_per_node is None:
        return None
    if hourly_usd_per_node < 0 or node_count < 1:
        raise ValueError("hourly price must be >= 0 and node count >= 1")
    tokens = sum(lv.total_output_tokens for lv in levels)
    return Cost(
        hourly_usd_per_node=hourly_usd_per_node,
        node_count=node_count,
        wall_s=wall_s,
        output_tokens=tokens,
        gpus=gpus,
        price_source=source,
        price_date=date,
        router_hourly_usd=router_hourly_usd,
    )
