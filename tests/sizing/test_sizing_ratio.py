"""The ratio / pin calculator, checked against hand-computed figures and the SKILL's examples."""

from __future__ import annotations

import pytest

from flashfleet.sizing import (
    PIN_BELOW,
    SizingError,
    Workload,
    draft_tokens_for,
    read_boot_log,
    size_pools,
    state_slots,
    target_ratio,
)
from tests.sizing.sizing_logs import SPECULATIVE, WORKED_EXAMPLE

TE = (13.50 / 257) / (15.03 / 1167552)  # token_equiv of the worked example, 4080.5


def test_worked_example_ratio_is_about_1_8() -> None:
    # r = (S + D) * te * dcp / L = 4 * 4080.5 / 9216 = 1.771
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    plan = size_pools(log, Workload(avg_request_len=9216, slots=4))
    assert plan.target_ratio == pytest.approx(4 * TE / 9216)
    assert plan.target_ratio == pytest.approx(1.771, abs=0.001)
    assert round(plan.target_ratio, 1) == 1.8
    # rounded up to two decimals: a starved state pool refuses requests, a short KV pool retracts
    assert plan.mamba_full_memory_ratio == 1.78
    assert plan.max_mamba_cache_size is None
    assert plan.option == ("mamba_full_memory_ratio", 1.78)
    assert plan.flag == "--mamba-full-memory-ratio 1.78"


def test_worked_example_prediction_is_balanced() -> None:
    # rest = 13.50 + 15.03 = 28.53 GiB; state budget = 28.53 * 1.78 / 2.78 = 18.268 GiB
    # slots = 18.268 / (13.50 / 257) = 347.8 -> 347 -> 347 // 4 = 86 requests by state
    # KV = 28.53 - 347 * 13.5 / 257 = 10.302 GiB = 800,303 tokens -> 800303 // 9216 = 86 requests
    plan = size_pools(read_boot_log(WORKED_EXAMPLE.read_text()), Workload(avg_request_len=9216, slots=4))
    p = plan.predicted
    assert p.mamba_slots == 347
    assert p.kda_request_cap == 86
    assert p.kv_tokens == pytest.approx((28.53 - 347 * 13.5 / 257) * 1167552 / 15.03, abs=1)
    assert p.kv_request_cap == 86
    assert p.limiting_pool == "balanced"
    # sglang's generic default: max(min(800303 / 202752 * 512, 4096), 2048) = 2048, then the clamp
    assert p.max_running_requests == 86


def test_observed_split_names_the_state_pool_as_the_limit() -> None:
    plan = size_pools(read_boot_log(WORKED_EXAMPLE.read_text()), Workload(avg_request_len=9216, slots=5))
    o = plan.observed
    assert o.mamba_slots == 257
    assert o.kda_request_cap == 51  # what sglang printed in its cap warning
    assert o.kv_request_cap == 1167552 // 9216  # 126
    assert o.limiting_pool == "kda-state"
    assert any("capped max_running_requests at 51" in n for n in plan.notes)


def test_dcp8_multiplies_the_ratio() -> None:
    # 4 * 4080.5 * 8 / 9216 = 14.17: the SKILL's "r about 14" for DCP8
    plan = size_pools(
        read_boot_log(WORKED_EXAMPLE.read_text()), Workload(avg_request_len=9216, slots=4, dcp=8)
    )
    assert plan.target_ratio == pytest.approx(14.17, abs=0.01)


@pytest.mark.parametrize(
    ("length", "expected"),
    [(2048, 10.0), (4096, 5.0), (8192, 2.5), (32768, 0.62), (65536, 0.31), (131072, 0.16)],
)
def test_skill_table_at_default_s5(length: int, expected: float) -> None:
    assert target_ratio(TE, length, slots=5) == pytest.approx(expected, rel=0.01, abs=0.005)


def test_speculative_draft_tokens_enter_the_ratio_and_the_prediction() -> None:
    # te = (9.45 / 180) / (19.63 / 702464) = 1878.7; r = (5 + 6) * 1878.7 / 16384 = 1.2614
    log = read_boot_log(SPECULATIVE.read_text())
    te = (9.45 / 180) / (19.63 / 702464)
    plan = size_pools(
        log, Workload(avg_request_len=16384, slots=5, draft_tokens=draft_tokens_for("low-latency"))
    )
    assert plan.workload.draft_tokens == 6
    assert plan.target_ratio == pytest.approx(11 * te / 16384)
    assert plan.mamba_full_memory_ratio == 1.27
    # rest = 9.45 + 11.26 + 0.05 + 19.63 = 40.39 GiB; budget = 40.39 * 1.27 / 2.27 = 22.597 GiB
    # joint solve: slots = 22.597 / (0.0525 * (1 + 6/5)) = 195.6 -> 195; 195 // 5 = 39 requests
    p = plan.predicted
    assert plan.rest_gib == pytest.approx(40.39)
    assert p.mamba_slots == 195
    assert p.kda_request_cap == 39
    # state = (195 + 39 * 6) * 0.0525 = 22.5225 GiB; KV = 17.8675 GiB = 639,367 tokens -> 39 by KV
    assert p.kv_tokens == pytest.approx((40.39 - 429 * 9.45 / 180) * 702464 / 19.63, abs=1)
    assert p.kv_request_cap == 39
    assert p.limiting_pool == "balanced"
    assert any("draft model" in n for n in plan.notes)


def test_strategy_draft_tokens() -> None:
    assert draft_tokens_for("low-latency") == 6
    assert draft_tokens_for("high-throughput") == 0
    with pytest.raises(SizingError, match="unknown strategy"):
        draft_tokens_for("fast")


def test_speculative_log_sized_without_drafts_is_flagged() -> None:
    plan = size_pools(read_boot_log(SPECULATIVE.read_text()), Workload(avg_request_len=16384))
    assert any("0 draft tokens" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("mode", "skip", "slots"),
    [
        ("disabled", False, 1),
        ("no_buffer", False, 3),
        ("no_buffer", True, 3),
        ("extra_buffer", False, 5),
        ("extra_buffer", True, 4),
        ("extra_buffer_no_overlap", False, 4),
        ("extra_buffer_lazy", False, 4),
        ("extra_buffer_lazy", True, 3),
    ],
)
def test_state_slots_table(mode: str, skip: bool, slots: int) -> None:
    assert state_slots(mode, skip_decode_lock=skip) == slots


def test_long_requests_need_a_concurrency_for_the_pin() -> None:
    # 5 * 4080.5 / 262144 = 0.0778, below 0.15
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    with pytest.raises(SizingError, match=r"0\.078, below 0\.15.*--concurrency"):
        size_pools(log, Workload(avg_request_len=262144))


def test_pin_below_threshold() -> None:
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    plan = size_pools(log, Workload(avg_request_len=262144, concurrency=4))
    assert plan.target_ratio < PIN_BELOW
    assert plan.mamba_full_memory_ratio is None
    assert plan.max_mamba_cache_size == 20  # 4 requests x 5 slots
    assert plan.flag == "--max-mamba-cache-size 20"
    # state = 20 * 13.5 / 257 = 1.0506 GiB; KV = 27.4794 GiB = 2,134,6xx tokens -> 8 requests of 256K
    p = plan.predicted
    assert p.kda_request_cap == 4
    assert p.kv_tokens == pytest.approx((28.53 - 20 * 13.5 / 257) * 1167552 / 15.03, abs=1)
    assert p.kv_request_cap == 8
    assert p.limiting_pool == "kda-state"
    assert any("pin 4 requests x 5 slots" in n for n in plan.notes)


def test_pin_that_does_not_fit_is_refused() -> None:
    log = read_boot_log(WORKED_EXAMPLE.read_text())
    with pytest.raises(SizingError, match=r"pinning 2000 state slots needs 105\.06 GiB.*28\.53 GiB"):
        size_pools(log, Workload(avg_request_len=262144, concurrency=400))


@pytest.mark.parametrize("length", [0, -5, float("nan"), float("inf")])
def test_non_positive_length_refused(length: float) -> None:
    with pytest.raises(SizingError, match="average request length"):
        Workload(avg_request_len=length)
