"""Pass/fail limits of one workload profile: the one model the stack file, the profiles' [gate]
tables, `bench --threshold NAME=VALUE` and the bench gate all use.

snake_case everywhere, so a limit is spelt the same in every place. Every limit is optional. Each
is checked at every concurrency level of the run, or only at ``concurrency`` when that is set (a
sweep's low levels are not expected to reach the throughput floor of its high ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from flashfleet.stack.errors import plain_message


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_output_throughput: float | None = Field(default=None, ge=0)  # tok/s, whole cluster
    min_request_throughput: float | None = Field(default=None, ge=0)  # req/s
    max_median_ttft_ms: float | None = Field(default=None, ge=0)
    max_p99_ttft_ms: float | None = Field(default=None, ge=0)
    max_median_tpot_ms: float | None = Field(default=None, ge=0)
    max_p99_tpot_ms: float | None = Field(default=None, ge=0)
    max_p99_itl_ms: float | None = Field(default=None, ge=0)
    min_success_ratio: float | None = Field(default=None, ge=0, le=1)  # completed / requested
    max_cost_per_mtok_usd: float | None = Field(default=None, ge=0)  # needs the hourly price
    concurrency: StrictInt | None = Field(default=None, ge=1)  # check only this level

    @classmethod
    def names(cls) -> list[str]:
        return list(cls.model_fields)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Thresholds:
        """From a profile's [gate] table or `--threshold` pairs: ValueError names the bad entry."""
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise ValueError(f"unknown threshold(s) {', '.join(unknown)} (known: {', '.join(cls.names())})")
        values: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key} must be a number, not {value!r}")
            values[key] = int(value) if key == "concurrency" else float(value)
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            raise ValueError(f"{first['loc'][0]}: {plain_message(first)}") from None

    def merged(self, overrides: Mapping[str, Any]) -> Thresholds:
        return Thresholds.from_mapping({**self.model_dump(exclude_none=True), **overrides})

    def is_empty(self) -> bool:
        return not any(v is not None for k, v in self.model_dump().items() if k != "concurrency")
