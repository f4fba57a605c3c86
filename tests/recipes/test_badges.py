"""Badges come from the measured cells; any change away from the measured command is Not Verified."""

import pytest

from flashfleet.recipes import render

AGENTX = {"precision": "mxfp4", "hicache": "l1l2", "hicache_size": 180}


@pytest.mark.parametrize(
    ("hardware", "strategy", "topology", "badge"),
    [
        ("gb300", "low-latency", "unified", "Verified"),
        ("gb300", "high-throughput", "unified", "Verified"),
        ("h200", "low-latency", "unified", "Final Verification In Progress"),
        ("gb300", "low-latency", "encoder-disagg", "Verified"),
        ("gb300", "high-throughput", "pd", "Preview"),
        ("gb300", "low-latency", "prefill-cp", "Not Verified"),
        ("mi355x", "low-latency", "unified", "Not Verified"),
        ("mi355x", "high-throughput", "unified", "Not Verified"),
    ],
)
def test_cell_badges(hardware, strategy, topology, badge):
    assert render(hardware, strategy, topology).badge == badge


def test_agentx_configuration_is_verified_on_mi355x():
    recipe = render("mi355x", "low-latency", overrides=AGENTX)
    assert recipe.badge == "Verified"
    assert "AgentX" in recipe.badge_source


@pytest.mark.parametrize(
    "overrides",
    [
        {"precision": "mxfp4", "hicache": "l1l2"},  # no --hicache-size 180
        {**AGENTX, "hicache_size": 200},
        {**AGENTX, "reasoning_parser": "off"},
    ],
)
def test_near_agentx_is_not_verified(overrides):
    assert render("mi355x", "low-latency", overrides=overrides).badge == "Not Verified"


def test_agentx_on_high_throughput_is_not_verified():
    assert render("mi355x", "high-throughput", overrides=AGENTX).badge == "Not Verified"


@pytest.mark.parametrize(
    "overrides",
    [
        {"kv_dsa": "bf16-tilelang"},
        {"hicache": "l1l2"},
        {"breakable_cuda_graph": "on"},
        {"mm_transport": "cpu"},
    ],
)
def test_any_change_from_measured_command_is_not_verified_but_offered(overrides):
    recipe = render("gb300", "low-latency", overrides=overrides)
    assert recipe.badge == "Not Verified"
    assert next(iter(overrides)) in recipe.badge_source


def test_setting_an_option_to_its_default_keeps_the_badge():
    assert render("gb300", "low-latency", overrides={"kv_dsa": "fp8-trtllm", "tp": 4}).badge == "Verified"


def test_pd_with_any_change_leaves_preview():
    assert render("gb300", "high-throughput", "pd", {"reasoning_parser": "on"}).badge == "Not Verified"
