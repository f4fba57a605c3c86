"""What `plan` says in a new user's first hour, each from the command that showed it wrong: whose
badge it is, one bring-up total, host memory as given, and a cost unknown in part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR

EXAMPLE = Path(__file__).parents[2] / "examples" / "stacks" / "Pulumi.h200-pair.yaml"  # the README's own


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plan", *argv]) == 0
    return capsys.readouterr().out


def _line(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_a_badge_flashfleet_lowered_is_not_called_the_cookbook_s(capsys: pytest.CaptureFixture[str]) -> None:
    lowered = _line(_plan(capsys, "gb300-2p1d"), "  recipe")
    assert "the cookbook's badge" not in lowered
    assert lowered.startswith(
        "  recipe   gb300 / high-throughput / pd: Not Verified (lowered by flashfleet from the cookbook's "
        "Preview: 2 prefill + 1 decode (2P1D) across nodes behind SMG"
    )
    own = _line(_plan(capsys, "gb300-pd"), "  recipe")
    assert own == "  recipe   gb300 / high-throughput / pd: Preview (the cookbook's badge)"
    # a variant the cookbook measured is its badge too
    variant = _line(_plan(capsys, "mi355x-agentx"), "  recipe")
    assert variant.endswith(": Verified (the cookbook's badge)")


def test_plan_has_one_bring_up_total(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "gb300-2p1d")
    assert "total" not in out.split("\nnode 0")[0]
    transfers = _line(out, "  transfers modeled")
    assert "done after 4.4 min, part of the time to first token below" in transfers
    assert "first bring-up at least 26.2 min" in _line(out, "  time to first token modeled")


def test_a_weights_snapshot_without_a_rate_has_an_unknown_bring_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _plan(capsys, "gb300-2p1d")
    lever = _line(out, "    lever caches.weightsSnapshot")
    assert (
        "on (without an initialization rate): first at least 26.2 min, second unknown (load unknown)" in lever
    )
    assert "second at least 0.3 min" not in out


def _own_stack(tmp_path: Path, base: Path, change: Any) -> str:
    doc = yaml.safe_load(base.read_text())
    change(doc["config"], doc["config"]["flashfleet:stack"])
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_host_memory_is_shown_in_the_gib_the_stack_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def memory_64(config: dict[str, Any], spec: dict[str, Any]) -> None:
        for host in spec["nodes"]["source"]["hosts"]:
            host["hostMemoryGib"] = 64

    out = _plan(capsys, _own_stack(tmp_path, EXAMPLE, memory_64))
    node = _line(out, "node 0")
    assert "host memory 64 GiB (68 GB)" in node  # GiB as given; GB as the sizing counts it
    assert "63 GiB" not in node


def test_an_unpriced_router_node_shows_the_priced_part_and_names_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def router_in_us_east_2(config: dict[str, Any], spec: dict[str, Any]) -> None:
        spec["cluster"]["router"]["instanceType"] = "m7i.xlarge"  # priced in us-east-1 only
        spec["nodes"]["count"] = 3
        config["aws:region"] = "us-east-2"
        spec["nodes"]["source"]["network"]["availabilityZone"] = "us-east-2a"

    path = _own_stack(tmp_path, DEFAULT_STACKS_DIR / "Pulumi.h200-replicas.yaml", router_in_us_east_2)
    cost = _line(_plan(capsys, path), "  cost")
    assert cost == (
        "  cost     unknown: 1 x m7i.xlarge (the router's node): no price in us-east-2 (listed for "
        "us-east-1); the priced nodes $126.59/h"
    )
    assert "GPU nodes" not in cost
    data = json.loads(_plan(capsys, path, "--format", "json"))
    assert data["hourly_cost_usd"] is None
    assert data["priced_part_usd"] == pytest.approx(2 * 63.296)


@pytest.mark.parametrize("stack", ["h200-replicas", "router-in-us-east-2"])
def test_up_says_the_cost_as_plan_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stack: str
) -> None:
    # `up` shows its phases before it asks: its cost line and plan's are the same words
    from flashfleet.cli.common import stack_arg
    from flashfleet.cli.up import phases
    from flashfleet.planning import load_stack
    from flashfleet.planning.plan_view import plan_data

    def router_in_us_east_2(config: dict[str, Any], spec: dict[str, Any]) -> None:
        spec["cluster"]["router"]["instanceType"] = "m7i.xlarge"
        spec["nodes"]["count"] = 3
        config["aws:region"] = "us-east-2"
        spec["nodes"]["source"]["network"]["availabilityZone"] = "us-east-2a"

    base = DEFAULT_STACKS_DIR / "Pulumi.h200-replicas.yaml"
    path = str(base) if stack == "h200-replicas" else _own_stack(tmp_path, base, router_in_us_east_2)
    planned = _line(_plan(capsys, path), "  cost").removeprefix("  cost     ")
    shown = phases(plan_data(load_stack(*stack_arg(path, None))))[-1]
    assert shown.endswith(f"; cost {planned}"), (shown, planned)
    assert "USD/h" not in shown
    assert "cost unknown USD" not in shown
    if stack != "h200-replicas":
        assert "the priced nodes $126.59/h" in shown
