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


def stored_run(tmp_path, stack, *, hourly=None, scale=1.0, method=None, gpus=16, completed=None, served=None):
    profile = get_profile("sweep").with_overrides(concurrency=LEVELS)

    def answer(c):
        from flashfleet.bench.runner import Completed
        from tests.bench.fakes import jsonl

        rec = curve(c, completed=profile.num_prompts(c) if completed is None else completed)
        rec["output_throughput"] = float(rec["output_throughput"]) * scale  # type: ignore[arg-type]
        return Completed(0, "", jsonl(rec))

    run = run_profile(profile, "http://127.0.0.1:9", FakeRunner(answer))
    from flashfleet.bench.cost import run_cost
    from flashfleet.bench.method import method_of

    cost = run_cost(hourly, 2, 3600.0, run.summaries, gpus=gpus, source="test price", date="2026-12-01")
    fp = {"recipe": {"hardware": "h200", "strategy": stack, "topology": "unified", "badge": "verified"},
          "node_count": 2, "instance_type": "p5en.48xlarge", "gpus": gpus,
          "method": method or method_of(profile, module="sglang.benchmark.serving", client_version="0.5.23")}  # fmt: skip
    fp.update(served or {})
    path = write_run(tmp_path, stack, run, fingerprint=fp, cost=cost, gate=None, gpus=gpus)
    write_report(load_run(path))
    return path


def test_report_files_are_written_and_pngs_are_real(tmp_path):
    path = stored_run(tmp_path, "ll", hourly=50.0)
    for name in (plots.PARETO, plots.THROUGHPUT_LATENCY, plots.LATENCY_PERCENTILES):
        data = (path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(data) > 10_000  # a drawn plot, not an empty canvas
    md = (path / "report.md").read_text()
    assert md.splitlines()[2].startswith("**Verdict: valid.**")  # the verdict opens the report
    assert md.index("Verdict") < md.index("| concurrency |") < md.index("## Cost")
    assert "- $100.00/hour (2 x $50.00; $6.250 per GPU-hour)" in md
    assert "- $100.00 for this run (3600 s)" in md
    assert "- price source: test price, 2026-12-01" in md
    assert md.count("\n| ") == 1 + len(LEVELS)  # header row + one row per level
    summary = json.loads((path / "summary.json").read_text())
    assert summary["valid"] is True
    for row in summary["levels"]:
        assert row["output_throughput_per_gpu"] == pytest.approx(row["output_throughput"] / 16)


def test_pareto_figure_is_throughput_per_gpu_against_p50_tpot():
    fig = plots.pareto([("a", levels(), 8), ("b", levels(2.0), 16)])
    (ax,) = fig.axes
    assert ax.get_xlabel() == "p50 TPOT (ms)"
    assert ax.get_ylabel() == "output throughput per GPU (tok/s/GPU)"
    a, b = ax.get_lines()
    want = levels()
    assert list(a.get_xdata()) == [lv.tpot_ms.median for lv in want]  # one point per concurrency
    assert list(a.get_ydata()) == pytest.approx([lv.output_throughput / 8 for lv in want])
    assert list(b.get_ydata()) == pytest.approx([2 * lv.output_throughput / 16 for lv in want])
    assert [t.get_text() for t in ax.texts][: len(LEVELS)] == [f"c={c}" for c in LEVELS]


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
    tput = [float(r.split("|")[6].replace(",", "")) for r in rows]
    assert tput[len(LEVELS) :] == pytest.approx([3 * t for t in tput[: len(LEVELS)]], rel=1e-3)
    assert all(r.split("|")[2].strip() == "yes" for r in rows)
    assert (out_dir / "compare.md").is_file()
    assert (out_dir / plots.PARETO).read_bytes()[:4] == b"\x89PNG"

    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["summary"]["stack"] for d in data["runs"]] == ["low-latency", "high-throughput"]
    assert data["method_differences"] == []


def test_compare_refuses_runs_measured_differently(tmp_path, capsys):
    from flashfleet.bench.method import method_of

    other = method_of(
        get_profile("inferencex-8k1k"), module="sglang.benchmark.serving", client_version="0.5.22"
    )
    a = stored_run(tmp_path, "low-latency")
    b = stored_run(tmp_path, "high-throughput", method=other)
    assert main(["compare", str(a), str(b)]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""  # no table for runs that cannot be compared
    err = captured.err
    assert "refused, the runs were measured differently" in err
    for field in ("profile:", "input_len:", "random_range_ratio:", "client_version:"):
        assert field in err
    assert "= 0.5.23" in err
    assert "= 0.5.22" in err
    assert "output_len:" not in err  # both 1024: not a difference
    assert "ignore_eos:" not in err  # both ignore EOS

    assert main(["compare", str(a), str(b), "--allow-method-mismatch"]) == 0
    out = capsys.readouterr().out
    assert "**The runs were measured differently** (compared anyway, as asked):" in out
    assert "- input_len: " in out


@pytest.mark.parametrize("other_cache", ["shared-prefix", None])
def test_compare_refuses_runs_whose_cache_method_differs_in_one_line(tmp_path, capsys, other_cache):
    from flashfleet.bench.method import CACHE_METHOD, method_of

    profile = get_profile("sweep")
    cold = method_of(profile, module="sglang.benchmark.serving", client_version="0.5.23", run_id="a")
    other = {**cold, "cache_method": CACHE_METHOD[other_cache] if other_cache else None}
    a = stored_run(tmp_path, "low-latency", method=cold)
    b = stored_run(tmp_path, "high-throughput", method=other)
    for extra in ([], ["--allow-method-mismatch"]):  # no flag lines up a warm cache with a cold one
        assert main(["compare", str(a), str(b), *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1
        assert "cache method differs" in lines[0]
        assert CACHE_METHOD["cold"] in lines[0]
        assert (CACHE_METHOD[other_cache] if other_cache else "not recorded") in lines[0]
    # the same cache method but another run id and other seeds: comparable
    again = method_of(profile, module="sglang.benchmark.serving", client_version="0.5.23", run_id="b")
    c = stored_run(tmp_path, "high-throughput", method=again)
    assert main(["compare", str(a), str(c)]) == 0


MODEL = "zai-org/GLM-5.3-Flash"


def served(commit, digest="sha256:" + "a" * 64, locked=None):
    """The fingerprint's record of the bytes served: node 0's commit, the image's digest."""
    weights = {
        "lock_digest": None,
        "locked": locked or {},
        "on_nodes": {"node-0": {MODEL: commit}} if commit else {},
    }
    return {"image": "lmsysorg/sglang:v0.5.23", "image_digest": digest, "weights": weights,
            "recipe": {"hardware": "h200", "strategy": "s", "topology": "unified", "model": MODEL}}  # fmt: skip


def test_compare_refuses_runs_that_served_another_commit_or_image_digest(tmp_path, capsys):
    a = stored_run(tmp_path, "week-1", served=served("1" * 40))
    b = stored_run(tmp_path, "week-2", served=served("2" * 40, digest="sha256:" + "b" * 64))
    assert main(["compare", str(a), str(b)]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "refused, the runs served different bytes" in captured.err
    assert f"weights {MODEL}: {'1' * 40} ({a}), {'2' * 40} ({b})" in captured.err
    assert f"image lmsysorg/sglang:v0.5.23: sha256:{'a' * 64} ({a}), sha256:{'b' * 64} ({b})" in captured.err

    assert main(["compare", str(a), str(b), "--allow-build-mismatch", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["build_differences"]) == 2
    assert main(["compare", str(a), str(b), "--allow-build-mismatch"]) == 0
    out = capsys.readouterr().out
    assert "**The runs served different bytes** (compared anyway, as asked):" in out
    assert f"- weights {MODEL}: " in out


def test_compare_takes_the_same_bytes_and_the_lock_where_the_nodes_said_nothing(tmp_path, capsys):
    same = stored_run(tmp_path, "a", served=served("1" * 40))
    locked = stored_run(tmp_path, "b", served=served(None, locked={MODEL: "1" * 40}))
    assert main(["compare", str(same), str(locked)]) == 0
    capsys.readouterr()
    # a run that loads the checkpoint but recorded no commit cannot be said to be the same bytes
    unknown = stored_run(tmp_path, "c", served=served(None))
    assert main(["compare", str(same), str(unknown)]) == 3
    assert f"weights {MODEL}: {'1' * 40} ({same}), not recorded ({unknown})" in capsys.readouterr().err


def test_compare_marks_failed_runs_and_exits_non_zero(tmp_path, capsys):
    good = stored_run(tmp_path, "low-latency")
    bad = stored_run(tmp_path, "high-throughput", completed=3)  # 3 of 16+ requests per level
    assert main(["compare", str(good), str(bad)]) == 3
    captured = capsys.readouterr()
    rows = [ln for ln in captured.out.splitlines() if ln.startswith("| h200")]
    assert {r.split("|")[2].strip() for r in rows if "high-throughput" in r} == {"**FAILED**"}
    assert {r.split("|")[2].strip() for r in rows if "low-latency" in r} == {"yes"}
    assert "**Not valid, shown for reference only:**" in captured.out
    assert f"{bad} is not a valid run" in captured.err


def test_compare_refuses_non_runs(tmp_path, capsys):
    a = stored_run(tmp_path, "x")
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "not a flashfleet benchmark run" in err
    assert "Traceback" not in err
    assert main(["compare", str(a)]) == 2
