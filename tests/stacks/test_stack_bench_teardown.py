"""The stack's optional bench thresholds and teardown section: strict, refused at their YAML
path, carried to the bench session (thresholds) and to the inventory (flashfleet_keep_caches)."""

from __future__ import annotations

from typing import Any

import pytest

from flashfleet.bench.fingerprint import Deployment
from flashfleet.bench.node_facts import stack_deployment
from flashfleet.bench.profiles import get_profile
from flashfleet.bench.session import gate_for
from flashfleet.bringup.contract import check_inventory
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.stack import StackError

Doc = dict[str, Any]

BENCH = {"thresholds": {"chat-1k1k": {"max_p99_ttft_ms": 2000, "min_success_ratio": 0.99}}}


def spec_of(doc: Doc) -> dict:
    return doc["config"]["flashfleet:stack"]


def test_an_unknown_threshold_is_refused_at_its_path(write_stack) -> None:
    def change(doc: Doc) -> None:
        spec_of(doc)["bench"] = {"thresholds": {"chat-1k1k": {"max_p99_ttfb_ms": 2000}}}

    with pytest.raises(StackError) as err:
        load_stack("broken", write_stack("h200-lowlat", change))
    assert err.value.paths() == ["flashfleet:stack.bench.thresholds.chat-1k1k.max_p99_ttfb_ms"]


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"thresholds": {"chat-1k1k": {"min_success_ratio": 1.5}}}, "thresholds.chat-1k1k.min_success_ratio"),
        ({"thresholds": {"chat-1k1k": {"max_p99_ttft_ms": "fast"}}}, "thresholds.chat-1k1k.max_p99_ttft_ms"),
        ({"threshold": {}}, "threshold"),
    ],
)
def test_bad_bench_values_name_their_path(write_stack, value, path) -> None:
    with pytest.raises(StackError) as err:
        load_stack("broken", write_stack("h200-lowlat", lambda d: spec_of(d).update(bench=value)))
    assert err.value.paths() == [f"flashfleet:stack.bench.{path}"]


def test_thresholds_reach_the_session_and_the_profile_gate_wins(write_stack) -> None:
    def change(doc: Doc) -> None:
        spec_of(doc)["bench"] = BENCH
        spec_of(doc)["nodes"]["source"]["instance"] = {"priceUsdPerHour": 63.3}

    deployment = stack_deployment("broken", write_stack("h200-lowlat", change))
    assert deployment.thresholds == {"chat-1k1k": {"max_p99_ttft_ms": 2000.0, "min_success_ratio": 0.99}}
    # the instance type and its price (the catalog's, or the stack's override) come with it
    assert (deployment.instance_type, deployment.hourly_usd_per_node) == ("p5en.48xlarge", 63.3)
    profile = get_profile("chat-1k1k")
    assert gate_for(profile, deployment).model_dump(exclude_none=True) == {
        "max_p99_ttft_ms": 2000.0,
        "min_success_ratio": 0.99,
    }
    cli = profile.with_overrides(gate=profile.gate.merged({"max_p99_ttft_ms": 500}))
    assert gate_for(cli, deployment).model_dump(exclude_none=True) == {
        "max_p99_ttft_ms": 500.0,
        "min_success_ratio": 0.99,
    }
    assert gate_for(get_profile("agentic-long"), deployment).is_empty()
    assert gate_for(profile, Deployment("x")).is_empty()


def test_no_stack_file_is_a_note_not_an_error(tmp_path) -> None:
    assert stack_deployment("nowhere", tmp_path).notes


def inventory_of(stacks, name: str = "broken") -> dict:
    b = load_stack(name, stacks)
    return build_inventory(
        b, [f"198.51.100.{i}" for i in range(len(b.nodes))], [f"10.0.0.{i}" for i in range(len(b.nodes))]
    )


@pytest.mark.parametrize("keep", [True, False])
def test_keep_caches_travels_as_an_inventory_fact(write_stack, keep: bool) -> None:
    stacks = write_stack("h200-lowlat", lambda d: spec_of(d).update(teardown={"keepCaches": keep}))
    inventory = inventory_of(stacks)
    check_inventory(inventory, "broken")
    assert {h["flashfleet_keep_caches"] for h in inventory["all"]["hosts"].values()} == {keep}


def test_without_a_teardown_section_the_caches_are_kept(write_stack) -> None:
    inventory = inventory_of(write_stack("h200-lowlat", lambda d: None))
    assert {h["flashfleet_keep_caches"] for h in inventory["all"]["hosts"].values()} == {True}


def test_the_contract_refuses_a_keep_caches_that_is_not_a_bool(write_stack) -> None:
    inventory = inventory_of(write_stack("h200-lowlat", lambda d: spec_of(d).update(teardown={})))
    next(iter(inventory["all"]["hosts"].values()))["flashfleet_keep_caches"] = "no"
    with pytest.raises(Exception, match="flashfleet_keep_caches"):
        check_inventory(inventory, "broken")


def test_a_keep_caches_typo_is_refused(write_stack) -> None:
    with pytest.raises(StackError) as err:
        load_stack(
            "broken", write_stack("h200-lowlat", lambda d: spec_of(d).update(teardown={"keepCache": 1}))
        )
    assert err.value.paths() == ["flashfleet:stack.teardown.keepCache"]
