"""The README reads top-down for a new user: what it is, the two set-up commands, a quick start
from two existing H200 hosts to a benchmark and back, the cloud path, then the reference; the
quick start's stack file validates and plans as the README shows it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from flashfleet.cli import main
from tests.readme.test_readme_walkthrough import BLOCKS, README, RUN

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "stacks" / "Pulumi.h200-pair.yaml"
TEXT = README.read_text(encoding="utf-8")
LINES = TEXT.splitlines()


def _heading_line(title: str) -> int:
    return LINES.index(title) + 1


def test_the_sections_come_in_the_order_a_new_user_reads_them() -> None:
    order = [
        "## Set-up on a fresh machine",
        "## Quick start: two H200 hosts you already have",
        "## The cloud path: AWS and Kubernetes",
        "## Reference",
    ]
    at = [_heading_line(title) for title in order]
    assert at == sorted(at), dict(zip(order, at, strict=True))
    assert at[0] < 30, "what the tool is, then straight to the set-up"


def _quick_start_commands() -> list[str]:
    start = _heading_line("## Quick start: two H200 hosts you already have")
    end = _heading_line("## The cloud path: AWS and Kubernetes")
    words = []
    for block in BLOCKS:
        if start < block.line < end:
            for cmd in block.commands:
                parts = shlex.split(cmd.text.split(">")[0], comments=True)
                if parts and parts[0] == "flashfleet":
                    words.append(parts[1])
    return words


def test_the_quick_start_goes_from_check_to_down_in_order() -> None:
    commands = _quick_start_commands()
    steps = ["check", "validate", "plan", "up", "status", "bench", "down"]
    firsts = [commands.index(step) for step in steps]
    assert firsts == sorted(firsts), commands


def test_the_walk_runs_the_quick_starts_own_stack() -> None:
    start = _heading_line("## Quick start: two H200 hosts you already have")
    end = _heading_line("## The cloud path: AWS and Kubernetes")
    ran = [c.text for b in RUN if start < b.line < end for c in b.commands]
    assert any("examples/stacks/Pulumi.h200-pair.yaml" in text for text in ran), ran
    assert any(text.startswith("flashfleet validate") for text in ran), ran
    assert any(text.startswith("flashfleet plan my-stacks/") for text in ran), ran


def test_the_example_stack_plans_two_h200_hosts_behind_the_router(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--stacks-dir", str(EXAMPLE.parent)]) == 0
    capsys.readouterr()
    assert main(["plan", str(EXAMPLE), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["stack"], plan["hardware"], plan["source"]["kind"]) == ("h200-pair", "h200", "existing")
    assert [(n["gpu_count"], n["role"]) for n in plan["nodes"]] == [(8, "server+router"), (8, "server")]
    assert plan["cluster"]["router"]["node"] == 0


def test_the_set_up_says_what_the_test_command_costs_and_who_needs_it() -> None:
    start = _heading_line("## Set-up on a fresh machine")
    end = _heading_line("## Quick start: two H200 hosts you already have")
    setup = " ".join(LINES[start:end])
    for phrase in ("does not need it", "It needs root", "from Go modules", "about 50 minutes"):
        assert phrase in setup, phrase
    # the CI internals live in docs/contributing.md, not between the set-up and the quick start
    contributing = (REPO / "docs" / "contributing.md").read_text(encoding="utf-8")
    for internal in ("pytest-xdist", "kwok", "property_budget"):
        assert internal not in setup, internal
        assert internal in contributing, internal
