"""The shipped example runs stay what `compare` reads: valid runs it lines up, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flashfleet.cli import main

RUNS = sorted((Path(__file__).parents[2] / "examples" / "runs").glob("*/*"))


def test_the_example_runs_are_two_valid_runs_of_real_bench_serving() -> None:
    assert [r.parent.name for r in RUNS] == ["standin-itl2ms", "standin-itl4ms"]
    for run in RUNS:
        summary = json.loads((run / "summary.json").read_text())
        assert summary["valid"] is True, run
        assert [lv["concurrency"] for lv in summary["levels"]] == [1, 4]
        assert all(lv["completed"] == 8 for lv in summary["levels"]), run
        # bench_serving's own output, per level, beside its argv and its warm-up run's
        assert sorted(p.name for p in (run / "raw").iterdir()) == [
            f"c000{c}.{ext}" for c in (1, 4) for ext in ("argv.json", "jsonl", "log", "warmup.argv.json")
        ]
        # the servers' own counters per level: a cold level found nothing of its prompts cached
        for lv in summary["levels"]:
            assert lv["server"]["prompt_tokens"] == 8 * 1024
            assert lv["server"]["cached_tokens"] == 0
            assert lv["server"]["prefix_cache_hit_rate"] == 0.0
        assert summary["warnings"] == []
        method = json.loads((run / "fingerprint.json").read_text())["method"]
        assert method["cache_method"] == "cold: fresh seed per level, warm-up from its own seed"
        seeds = [s[k] for s in method["seeds"] for k in ("measured", "warmup")]
        assert len(set(seeds)) == 4


def test_compare_lines_them_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *map(str, RUNS), "--out", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| h200")]
    assert len(rows) == 4
    fast, slow = (json.loads((r / "summary.json").read_text())["levels"][1] for r in RUNS)
    # half the time between tokens: about twice the output throughput at the same concurrency
    assert 1.6 < fast["output_throughput"] / slow["output_throughput"] < 2.4
    assert (tmp_path / "compare.md").is_file()
