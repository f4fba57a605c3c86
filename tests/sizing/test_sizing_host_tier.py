"""HiCache L1+L2 host tier: the per-rank overhead model and the refusal."""

from __future__ import annotations

import pytest

from flashfleet.sizing import (
    HOST_TIER_FACTOR,
    HostTierError,
    SizingError,
    check_host_tier_fits,
    host_tier_need_gb,
    host_tier_per_rank_gb,
    max_hicache_size_gb,
)


def test_model_reproduces_the_measured_agentx_point() -> None:
    # --hicache-size 180 on four ranks needs 750 GB per node: 187.5 GB per rank ("about 190")
    assert host_tier_need_gb(180, 4) == pytest.approx(750.0)
    assert host_tier_per_rank_gb(180) == pytest.approx(187.5)
    assert round(host_tier_per_rank_gb(180), -1) == 190
    assert pytest.approx(750 / 720) == HOST_TIER_FACTOR


def test_need_scales_with_size_and_ranks() -> None:
    assert host_tier_need_gb(90, 8) == pytest.approx(90 * 8 * 750 / 720)  # 750 GB
    assert host_tier_need_gb(180, 8) == pytest.approx(1500.0)


def test_fits_returns_the_need() -> None:
    assert check_host_tier_fits(180, 4, 1024) == pytest.approx(750.0)
    assert check_host_tier_fits(180, 4, 750) == pytest.approx(750.0)  # exactly full still starts


def test_does_not_fit_is_refused_with_the_numbers() -> None:
    with pytest.raises(HostTierError) as info:
        check_host_tier_fits(180, 4, 512)
    text = str(info.value)
    assert "--hicache-size 180" in text
    assert "187.5 GB per rank x 4 ranks = 750.0 GB" in text
    assert "512 GB" in text
    # 512 / (4 * 750 / 720) = 122.9 -> 122
    assert "largest size that fits: 122 GB" in text
    assert isinstance(info.value, ValueError)  # pydantic validators turn it into a field error


def test_reserved_memory_counts() -> None:
    assert check_host_tier_fits(180, 4, 800) == pytest.approx(750.0)
    with pytest.raises(HostTierError, match="minus 64 GB reserved"):
        check_host_tier_fits(180, 4, 800, reserved_gb=64)


def test_max_size() -> None:
    assert max_hicache_size_gb(750, 4) == 180
    assert max_hicache_size_gb(749, 4) == 179


@pytest.mark.parametrize(
    ("size", "ranks", "memory"), [(0, 4, 1024), (-1, 4, 1024), (180, 0, 1024), (180, 4, 0)]
)
def test_bad_inputs(size: float, ranks: int, memory: float) -> None:
    with pytest.raises(SizingError):
        check_host_tier_fits(size, ranks, memory)
