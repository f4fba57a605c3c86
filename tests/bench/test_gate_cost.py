"""Gate thresholds, cost arithmetic, and summary parsing of sglang's JSON quirks."""

from __future__ import annotations

import json

import pytest

from flashfleet.bench.cost import level_cost_per_mtok, run_cost
from flashfleet.bench.gate import Thresholds, evaluate
from flashfleet.bench.report import _cost_lines
from flashfleet.bench.summary import ResultFormatError, parse_record, read_jsonl
from tests.bench.fakes import curve, jsonl, record


def test_jsonl_with_infinity_and_nan_parses():
    rec = record(4, throughput=100.0, ttft=50.0, tpot=10.0)
    rec["p99_itl_ms"] = float("nan")
    text = jsonl(rec)
    assert "Infinity" in text  # request_rate inf, exactly as sglang's json.dumps writes it
    assert "NaN" in text
    (line,) = read_jsonl(text)
    level = parse_record(line, num_prompts=10)
    assert level.itl_ms.p99 is None
    assert level.ttft_ms.p99 == pytest.approx(75.0)
    assert level.success_ratio == 0.8


def test_a_line_that_is_not_a_result_is_refused():
    with pytest.raises(ResultFormatError, match="missing"):
        parse_record({"backend": "sglang"})
    with pytest.raises(ResultFormatError, match="line 2"):
        read_jsonl(json.dumps(curve(1)) + "\n{oops\n")


def test_gate_checks_every_level_or_one():
    levels = [parse_record(curve(c), num_prompts=8) for c in (1, 16, 64)]
    floor = levels[1].output_throughput
    gate = evaluate(Thresholds(min_output_throughput=floor), levels)
    assert [c.passed for c in gate.checks] == [False, True, True]
    assert not gate.passed

    at_64 = evaluate(Thresholds(min_output_throughput=floor, max_p99_ttft_ms=1000, concurrency=64), levels)
    assert at_64.passed
    assert {c.concurrency for c in at_64.checks} == {64}

    strict = evaluate(Thresholds(max_p99_ttft_ms=levels[2].ttft_ms.p99 - 0.01, concurrency=64), levels)
    assert not strict.passed
    assert "FAIL max_p99_ttft_ms c=64" in strict.checks[0].line()

    absent = evaluate(Thresholds(min_output_throughput=1, concurrency=32), levels)
    assert not absent.passed
    assert absent.missing_levels == (32,)


def test_unmeasured_values_fail_their_check():
    rec = curve(8)
    rec["p99_tpot_ms"] = float("nan")
    gate = evaluate(Thresholds(max_p99_tpot_ms=1e9, max_cost_per_mtok_usd=1e9), [parse_record(rec)])
    assert [c.actual for c in gate.checks] == [None, None]
    assert not gate.passed


def test_thresholds_from_data_and_overrides():
    t = Thresholds.from_mapping({"max_p99_ttft_ms": 2000, "concurrency": 64})
    assert t.merged({"max_p99_ttft_ms": 1500.0}).max_p99_ttft_ms == 1500.0
    assert Thresholds().is_empty()
    assert Thresholds(concurrency=4).is_empty()
    with pytest.raises(ValueError, match="must be a number"):
        Thresholds.from_mapping({"max_p99_ttft_ms": "fast"})


def test_cost_of_a_run_and_per_million_tokens():
    levels = [parse_record(record(c, throughput=1000.0, ttft=1, tpot=1)) for c in (8, 16)]
    cost = run_cost(60.0, 2, 1800.0, levels)
    assert cost is not None
    assert cost.hourly_usd == 120.0
    assert cost.run_usd == pytest.approx(60.0)
    assert cost.output_tokens == 20_000
    assert cost.per_mtok_output_usd == pytest.approx(60.0 / 0.02)
    # 1000 tok/s = 3.6 M tok/h at $120/h
    assert level_cost_per_mtok(120.0, levels[0]) == pytest.approx(120.0 / 3.6)
    assert run_cost(None, 2, 1800.0, levels) is None
    with pytest.raises(ValueError, match="node count"):
        run_cost(1.0, 0, 1.0, levels)
    # A cluster router's CPU node of its own is billed beside the GPU nodes.
    routed = run_cost(60.0, 2, 1800.0, levels, router_hourly_usd=0.2)
    assert routed is not None
    assert routed.hourly_usd == pytest.approx(120.2)
    assert routed.run_usd == pytest.approx(60.1)
    assert "2 x $60.00 + the router's node $0.2000" in "\n".join(_cost_lines(routed.model_dump()))


def test_the_stored_shapes_dump_their_derived_figures_in_place():
    """summary.json's gate, cost and level rows: the models' dumps, derived figures included, in
    the order the file has always had (the gate leads with its verdict)."""
    levels = [parse_record(curve(c), num_prompts=8) for c in (1, 16)]
    gate = evaluate(Thresholds(min_output_throughput=levels[1].output_throughput), levels)
    dumped = gate.model_dump(mode="json")
    assert list(dumped) == ["passed", "checks", "missing_levels"]
    assert dumped["passed"] is False
    assert list(dumped["checks"][0]) == ["threshold", "limit", "concurrency", "actual", "passed"]
    cost = run_cost(60.0, 2, 1800.0, levels, gpus=16)
    assert cost is not None
    assert list(cost.model_dump())[-5:] == [
        "price_date", "hourly_usd", "usd_per_gpu_hour", "run_usd", "per_mtok_output_usd",
    ]  # fmt: skip
    assert cost.model_dump()["usd_per_gpu_hour"] == pytest.approx(120.0 / 16)
    row = levels[0].model_dump()
    assert list(row)[-1] == "success_ratio"
    assert row["success_ratio"] == levels[0].completed / 8
    assert type(levels[0]).model_validate({k: v for k, v in row.items() if k != "success_ratio"}) == levels[0]
