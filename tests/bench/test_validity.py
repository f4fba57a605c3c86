"""Which parsed levels are not measurements, without a server: bench_serving's result line as it
writes it (tests/bench/fakes.py), with the counts of each failure. The same verdicts from the real
bench_serving against misbehaving servers: tests/bench/test_refusals_oracle.py (slow tier)."""

from __future__ import annotations

from typing import Any

import pytest

from flashfleet.bench.summary import parse_record
from flashfleet.bench.validity import refusal
from tests.bench.fakes import record


def verdict(expected: int = 4, **fields: Any) -> str | None:
    line = {**record(2, throughput=3.2, ttft=50.0, tpot=10.0, completed=4), **fields}
    return refusal(parse_record(line, num_prompts=expected), expected)


def test_a_level_whose_every_request_succeeded_with_text_is_a_measurement() -> None:
    assert verdict() is None
    # a bench_serving that does not retokenize (no such key) is taken at its word
    assert verdict(total_output_tokens_retokenized=None) is None


def test_requests_that_came_back_without_text_measured_nothing() -> None:
    # sglang's native client counts the 4 x 8 tokens it ASKED for when no text streamed back
    assert verdict(total_output_tokens=32, total_output_tokens_retokenized=0) == (
        "measured nothing: 4 requests came back with no text "
        "(0 output tokens; bench_serving counted the 32 requested)"
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"completed": 0}, "no request succeeded"),
        ({"total_output_tokens": 0}, "measured nothing: 4 requests completed with 0 output tokens"),
        ({"completed": 3}, "1 of 4 requests failed"),
    ],
)
def test_each_other_refusal_names_its_count(fields: dict[str, Any], reason: str) -> None:
    assert verdict(**fields) == reason
