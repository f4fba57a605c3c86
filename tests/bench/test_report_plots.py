"""Plots are checked as matplotlib figures (axes, labels, series, data), then as PNG files;
reports and `flashfleet compare` line the runs up."""

from __future__ import annotations

import json
import math

import pytest

from flashfleet.bench import plots
from flashfleet.bench.driver import run_profile
from flashfleet.bench.profiles import get_profile
from flashfleet.bench.report import write_report
from flashfleet.bench.store import load_run, write_run
from flashfleet.bench.summary import parse_record
from flashfleet.cli import main
from tests.bench.fakes import FakeRunner, curve

LEVELS = (1, 4, 16, 64)


def levels(scale: float = 1.0):
    out = []
    for c in LEVELS:
        rec = curve(c)
        rec["output_throughput"] = float(rec["output_throughput"]) * scale  # type: ignore[arg-type]
        out.append(parse_record(rec, num_prompts=8))
    return out


def test_throughput_latency_figure_has_one_series_per_run():
    fig = plots.throughput_latency([("low-latency", levels()), ("high-throughput", levels(2.0))])
    (ax,) = fig.axes
    assert ax.get_xlabel() == "median TPOT (ms)"
    assert ax.get_ylabel() == "output throughput (tok/s)"
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["low-latency", "high-throughput"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["low-latency", "high-throughput"]
    want = levels()
    assert list(lines[0].get_xdata()) == [lv.tpot_ms.median for lv in want]
    assert list(lines[0].get_ydata()) == [lv.output_throughput for lv in want]
    assert list(lines[1].get_ydata()) == pytest.approx([2 * lv.output_throughput for lv in want])
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("c=64") == 2
    assert {f"c={c}" for c in LEVELS} <= set(labels)


def test_percentile_figure_has_ttft_and_tpot_panels():
    fig = plots.latency_percentiles("run", levels())
    ttft_ax, tpot_ax = fig.axes
    assert (ttft_ax.get_ylabel(), tpot_ax.get_ylabel()) == ("TTFT (ms)", "TPOT (ms)")
    assert ttft_ax.get_xlabel() == tpot_ax.get_xlabel() == "max concurrency"
    assert ttft_ax.get_xscale() == "log"
    for ax, metric in ((ttft_ax, "ttft_ms"), (tpot_ax, "tpot_ms")):
        lines = ax.get_lines()
        assert [ln.get_label() for ln in lines] == ["p50", "p90", "p99"]
        assert list(lines[0].get_xdata()) == list(LEVELS)
        for line, stat in zip(lines, ("median", "p90", "p99"), strict=True):
            assert list(line.get_ydata()) == [getattr(getattr(lv, metric), stat) for lv in levels()]
        p50, p99 = lines[0].get_ydata(), lines[2].get_ydata()
        assert all(hi >= lo for lo, hi in zip(p50, p99, strict=True))


def test_missing_percentiles_are_gaps_not_zeros():
    rec = curve(8)
    rec["p99_ttft_ms"] = float("nan")  # what sglang writes when nothing succeeded
    fig = plots.latency_percentiles("run", [parse_record(rec)])
    p99 = fig.axes[0].get_lines()[2].get_ydata()
    assert math.isnan(p99[0])


def stored_run(tmp_path, stack, *, hourly=None, scale=1.0):
    def answer(c):
        from flashfleet.bench.runner import Completed
        from tests.bench.fakes import jsonl

        rec = curve(c)
        rec["output_throughput"] = float(rec["output_throughput"]) * scale  # type: ignore[arg-type]
        return Completed(0, "", jsonl(rec))

    profile = get_profile("sweep").with_overrides(concurrency=LEVELS)
    run = run_profile(profile, "http://127.0.0.1:9", FakeRunner(answer))
    from flashfleet.bench.cost import run_cost

    cost = run_cost(hourly, 2, 3600.0, run.summaries)
    fp = {"recipe": {"hardware": "h200", "strategy": stack, "topology": "unified", "badge": "verified"},
          "node_count": 2, "instance_type": "p5en.48xlarge"}  # fmt: skip
    path = write_run(tmp_path, stack, run, fingerprint=fp, cost=cost, gate=None)
    write_report(load_run(path))
    return path


def test_report_files_are_written_and_pngs_are_real(tmp_path):
    path = stored_run(tmp_path, "ll", hourly=50.0)
    for name in (plots.THROUGHPUT_LATENCY, plots.LATENCY_PERCENTILES):
        data = (path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(data) > 10_000  # a drawn plot, not an empty canvas
    md = (path / "report.md").read_text()
    assert "2 x $50.00/h = $100.00/h; this run ≈ $100.00" in md
    assert md.count("\n| ") == 1 + len(LEVELS)  # header row + one row per level


def test_compare_lines_up_runs(tmp_path, capsys):
    a = stored_run(tmp_path, "low-latency", hourly=50.0)
    b = stored_run(tmp_path, "high-throughput", hourly=50.0, scale=3.0)
    out_dir = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out_dir)]) == 0
    text = capsys.readouterr().out
    rows = [ln for ln in text.splitlines() if ln.startswith("| h200")]
    assert len(rows) == 2 * len(LEVELS)
    assert rows[0].startswith("| h200 low-latency unified (low-latency/")
    assert rows[-1].startswith("| h200 high-throughput unified (high-throughput/")
    tput = [float(r.split("|")[5].replace(",", "")) for r in rows]
    assert tput[len(LEVELS) :] == pytest.approx([3 * t for t in tput[: len(LEVELS)]], rel=1e-3)
    assert (out_dir / "compare.md").is_file()
    assert (out_dir / plots.THROUGHPUT_LATENCY).read_bytes()[:4] == b"\x89PNG"

    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["summary"]["stack"] for d in data] == ["low-latency", "high-throughput"]


def test_compare_refuses_non_runs(tmp_path, capsys):
    a = stored_run(tmp_path, "x")
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "not a flashfleet benchmark run" in err
    assert "Traceback" not in err
    assert main(["compare", str(a)]) == 2
