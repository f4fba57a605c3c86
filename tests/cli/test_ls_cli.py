"""`flashfleet ls` without the Pulumi CLI: every stack file, from its plan, and one line saying the
state is unknown (tests/e2e/test_pulumi_engine.py lists a stack that is up, under the engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR, list_stacks


def test_without_pulumi_every_stack_file_is_listed_with_its_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["ls", "--stacks-dir", str(DEFAULT_STACKS_DIR), "--format", "json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [r["stack"] for r in rows] == list_stacks()
    for row in rows:
        plan = load_stack(row["stack"])
        assert (row["hardware"], row["source"], row["hourly_usd"]) == (
            plan.spec.hardware, plan.spec.nodes.source.kind, plan.hourly_cost_usd,
        )  # fmt: skip
        assert row["state"] == "unknown"
        assert row["cost_so_far_usd"] is None
    assert captured.err.count("\n") == 1
    assert "state unknown: the Pulumi CLI is not installed" in captured.err


def test_an_invalid_stack_file_is_a_row_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    (tmp_path / "Pulumi.broken.yaml").write_text("config:\n  flashfleet:stack:\n    hardware: h20\n")
    assert main(["ls", "--stacks-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "STACK",
        "HARDWARE",
        "SOURCE",
        "STATE",
        "ENDPOINT",
        "EXPIRES",
        "COST",
        "SO",
        "FAR",
    ]
    assert out[1].split()[:2] == ["broken", "-"], out
    assert out[1].index("invalid:") == out[0].index("STATE"), out  # the state under its header
