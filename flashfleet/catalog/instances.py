"""AWS instance types as data (``instances.toml``), with unknown figures kept unknown (None)."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from flashfleet.catalog.tables import CatalogError, of, table

Capacity = Literal["any", "block-only"]
GIB_TO_GB = 1.073741824
# A price is kept only with where it comes from (and, for a block's, as of when: the rates move).
PRICE_KEYS = ("price_usd_per_hour", "price_source")
BLOCK_PRICE_KEYS = ("block_price_usd_per_hour", "block_price_source", "block_price_date")


@dataclass(frozen=True)
class InstanceType:
    name: str
    hardware: str
    arch: Literal["arm64", "x86_64"]
    gpus: int
    vcpus: int | None
    host_memory_gib: int | None
    efa_network_cards: int | None
    # The on-demand price in the plan's region (planning.checks.effective_instance fills it from
    # prices_by_region, or the stack's own price); None in the catalog itself.
    price_usd_per_hour: float | None
    capacity: Capacity
    unknown: tuple[str, ...]
    secondary: tuple[str, ...]
    source: str
    # Where price_usd_per_hour comes from and as of when (a price without a source is not kept).
    price_source: str | None = None
    price_date: str | None = None
    # Sold as whole UltraServers of this type (Capacity Blocks' UltraServer form), when known.
    ultraserver_type: str | None = None
    # The listed Capacity Block rate of one instance-hour, with its source and date, when known.
    block_price_usd_per_hour: float | None = None
    block_price_source: str | None = None
    block_price_date: str | None = None
    # The listed on-demand price of one instance-hour, by AWS region.
    prices_by_region: Mapping[str, float] = field(default_factory=dict)

    @property
    def host_memory_gb(self) -> int | None:
        return gib_to_gb(self.host_memory_gib) if self.host_memory_gib is not None else None


def gib_to_gb(gib: float) -> int:
    return math.floor(gib * GIB_TO_GB)


def _load() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("instances.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def instance_catalog() -> dict[str, InstanceType]:
    out: dict[str, InstanceType] = {}
    for name, raw in table(_load(), "instances.toml", ("types", "disk"))["types"].items():
        # price_usd_per_hour is the catalog's listed price by region (prices_by_region)
        of(InstanceType, f"instances.toml [types.{name}]", raw, skip={"name", "prices_by_region"},
           optional={"vcpus", "host_memory_gib", "efa_network_cards", "price_usd_per_hour"})  # fmt: skip
        out[name] = InstanceType(
            name=name,
            hardware=raw["hardware"],
            arch=raw["arch"],
            gpus=int(raw["gpus"]),
            vcpus=raw.get("vcpus"),
            host_memory_gib=raw.get("host_memory_gib"),
            efa_network_cards=raw.get("efa_network_cards"),
            price_usd_per_hour=None,
            prices_by_region=dict(raw.get("price_usd_per_hour") or {}),
            capacity=raw["capacity"],
            unknown=tuple(raw["unknown"]),
            secondary=tuple(raw["secondary"]),
            source=raw["source"],
            price_source=raw.get("price_source"),
            price_date=raw.get("price_date"),
            ultraserver_type=raw.get("ultraserver_type"),
            block_price_usd_per_hour=raw.get("block_price_usd_per_hour"),
            block_price_source=raw.get("block_price_source"),
            block_price_date=raw.get("block_price_date"),
        )
        for keys in (PRICE_KEYS, BLOCK_PRICE_KEYS):
            if len({raw.get(k) is None for k in keys}) > 1:
                raise CatalogError(
                    f"instances.toml: {name}: {', '.join(keys)} go together (a price with its source)"
                )
        for key in out[name].unknown:
            if raw.get(key) is not None:
                raise CatalogError(f"instances.toml: {name}.{key} is listed unknown but has a value")
    return out


@dataclass(frozen=True)
class DiskFigures:
    weights_gb: dict[str, int]
    allowance_gb: int
    source: str

    def root_volume_gb(self, precision: str) -> int:
        # Unrecorded 4-bit sizes fall back to the FP8 checkpoint, which is larger.
        weights = self.weights_gb.get(precision, max(self.weights_gb.values()))
        return weights + self.allowance_gb


@cache
def disk_figures() -> DiskFigures:
    raw = table(_load()["disk"], "instances.toml [disk]", ("weights_gb", "allowance_gb", "weights_source"))
    return DiskFigures(
        weights_gb={k: int(v) for k, v in raw["weights_gb"].items()},
        allowance_gb=int(raw["allowance_gb"]),
        source=raw["weights_source"],
    )
