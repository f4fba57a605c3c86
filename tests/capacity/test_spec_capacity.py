"""What a stack file may say about its capacity, checked offline (`validate`, `plan`)."""

from __future__ import annotations

from typing import Any

import pytest
from test_pulumi_main import catalog_spec

from flashfleet.planning import parse_spec, resolve_spec
from flashfleet.stack import StackError

BOUGHT = {
    "offeringId": "cbo-00000000000000001",
    "availabilityZone": "us-east-2a",
    "instanceCount": 1,
    "start": "2026-12-03T11:30:00Z",
    "end": "2026-12-05T11:30:00Z",
    "upfrontPriceUsd": 2400.0,
    "priceSource": "EC2 PurchaseCapacityBlock cbo-00000000000000001 -> cr-0123456789abcdef0",
}


def resolve(stack: str, spec: dict[str, Any]) -> Any:
    return resolve_spec(stack, parse_spec(stack, spec), region="us-east-2", has_hf_token=True)


def bought(**changes: Any) -> dict[str, Any]:
    spec = catalog_spec("gb300-lowlat")
    spec["nodes"]["source"]["capacity"] = {
        "kind": "block",
        "reservationId": "cr-0123456789abcdef0",
        "purchased": {**BOUGHT, **changes},
    }
    return spec


def test_ttl_block_is_for_block_stacks_only() -> None:
    spec = catalog_spec("h200-lowlat")
    spec["ttl"] = "block"
    with pytest.raises(StackError) as info:
        resolve("h200-lowlat", spec)
    assert info.value.paths() == ["flashfleet:stack.ttl"]


def test_a_recorded_block_in_another_zone_than_the_network_is_refused() -> None:
    with pytest.raises(StackError) as info:
        resolve("gb300-lowlat", bought(availabilityZone="us-east-2b"))
    assert info.value.paths() == ["flashfleet:stack.nodes.source.network.availabilityZone"]
    assert "capacity-zone" in str(info.value)


def test_a_recorded_window_must_end_after_it_starts() -> None:
    with pytest.raises(StackError) as info:
        resolve("gb300-lowlat", bought(end="2026-12-03T11:30:00Z"))
    assert "is not after start" in str(info.value)


def test_a_recorded_block_prices_the_nodes_with_its_source() -> None:
    plan = resolve("gb300-lowlat", bought())
    assert plan.hourly_cost_usd == pytest.approx(2400 / 48)
    assert plan.price_source == f"Capacity Block purchase: {BOUGHT['priceSource']}"
    assert not plan.needs_capacity_purchase
