"""Markdown reports: one run (report.md beside its plots) and several runs lined up (compare)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flashfleet.bench import plots
from flashfleet.bench.store import REPORT, StoredRun


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


LEVEL_HEADER = (
    "| concurrency | requests ok | output tok/s | req/s | TTFT p50 / p90 / p99 (ms) "
    "| TPOT p50 / p90 / p99 (ms) | ITL p50 / p99 (ms) | $ / M output tok |"
)


def _level_cells(row: dict[str, Any]) -> list[str]:
    def pct(metric: str, stats: Sequence[str]) -> str:
        return " / ".join(_f(row[metric].get(s)) for s in stats)

    conc = row["concurrency"] if row["concurrency"] is not None else "unlimited"
    ok = f"{row['completed']}/{row['num_prompts']}" if row.get("num_prompts") else str(row["completed"])
    return [
        str(conc), ok, _f(row["output_throughput"]), _f(row["request_throughput"], 2),
        pct("ttft_ms", ("median", "p90", "p99")), pct("tpot_ms", ("median", "p90", "p99")),
        pct("itl_ms", ("median", "p99")), _f(row.get("cost_per_mtok_output_usd"), 2),
    ]  # fmt: skip


def _table(header: str, rows: list[list[str]]) -> list[str]:
    sep = "|" + "|".join("---" for _ in range(header.count("|") - 1)) + "|"
    return [header, sep, *("| " + " | ".join(r) + " |" for r in rows)]


def _fingerprint_lines(fp: dict[str, Any]) -> list[str]:
    recipe = fp.get("recipe") or {}
    lines = [
        f"- recipe: {recipe.get('hardware', '?')} / {recipe.get('strategy', '?')} / "
        f"{recipe.get('topology', '?')}, badge **{recipe.get('badge', 'unknown')}**"
        if recipe
        else "- recipe: not recorded",
        f"- image: {fp.get('image') or 'unknown'} ({fp.get('image_digest') or 'digest unknown'})",
        f"- instances: {fp.get('node_count', '?')} x {fp.get('instance_type') or 'unknown type'}",
        f"- flashfleet {fp.get('flashfleet_version', '?')}",
    ]
    for node, versions in sorted((fp.get("node_versions") or {}).items()):
        lines.append(f"- {node}: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    for proc in recipe.get("processes", []):
        lines.append(f"- `{proc['name']}` (node {proc['node']}): `{' '.join(proc['argv'])}`")
    return lines


def run_markdown(run: StoredRun) -> str:
    s = run.summary
    out = [
        f"# Benchmark {s['stack']} / {run.path.name}: {s['profile']['name']}",
        "",
        s["profile"]["description"],
        "",
        f"Endpoint {s['endpoint']}, started {s['started_at']}, {s['wall_s']:.0f} s. "
        f"Result: **{'ok' if s['ok'] else 'FAILED'}**.",
        "",
        *_table(LEVEL_HEADER, [_level_cells(r) for r in s["levels"]]),
        "",
    ]
    for failure in s["failures"]:
        out.append(f"- concurrency {failure['concurrency']} failed: {failure['error']}")
    if s["failures"]:
        out.append("")
    cost = s.get("cost")
    if cost:
        out += [
            "## Cost",
            "",
            f"{cost['node_count']} x ${cost['hourly_usd_per_node']:.2f}/h = ${cost['hourly_usd']:.2f}/h; "
            f"this run ≈ ${cost['run_usd']:.2f}; "
            f"${_f(cost['per_mtok_output_usd'], 2)} per million output tokens over the run.",
            "",
        ]
    gate = s.get("gate")
    if gate and (gate["checks"] or gate["missing_levels"]):
        out += ["## Gate: " + ("PASS" if gate["passed"] else "FAIL"), ""]
        for c in gate["checks"]:
            actual = "not measured" if c["actual"] is None else f"{c['actual']:.4g}"
            mark = "pass" if c["passed"] else "**FAIL**"
            out.append(f"- {mark} {c['threshold']} at c={c['concurrency']}: {actual} (limit {c['limit']:g})")
        for level in gate["missing_levels"]:
            out.append(f"- **FAIL** the gate names concurrency {level}, which this run does not have")
        out.append("")
    out += ["## What was measured", "", *_fingerprint_lines(run.fingerprint), ""]
    out += [f"![throughput vs latency]({plots.THROUGHPUT_LATENCY})", "",
            f"![TTFT and TPOT percentiles]({plots.LATENCY_PERCENTILES})", ""]  # fmt: skip
    return "\n".join(out)


def write_report(run: StoredRun) -> list[Path]:
    """report.md and both plots into the run's directory; returns the files written."""
    levels = run.levels
    written = [
        plots.save(plots.throughput_latency([(run.label, levels)]), run.path / plots.THROUGHPUT_LATENCY),
        plots.save(plots.latency_percentiles(run.label, levels), run.path / plots.LATENCY_PERCENTILES),
    ]
    (run.path / REPORT).write_text(run_markdown(run))
    return [run.path / REPORT, *written]


COMPARE_HEADER = (
    "| run | badge | instances | concurrency | output tok/s | TTFT p50 / p99 (ms) "
    "| TPOT p50 / p99 (ms) | $ / M output tok |"
)


def compare_markdown(runs: Sequence[StoredRun]) -> str:
    rows = []
    for run in runs:
        fp, recipe = run.fingerprint, run.fingerprint.get("recipe") or {}
        instances = f"{fp.get('node_count', '?')} x {fp.get('instance_type') or '?'}"
        for row in run.summary["levels"]:
            rows.append([
                run.label, str(recipe.get("badge", "-")), instances,
                str(row["concurrency"] if row["concurrency"] is not None else "unlimited"),
                _f(row["output_throughput"]),
                f"{_f(row['ttft_ms'].get('median'))} / {_f(row['ttft_ms'].get('p99'))}",
                f"{_f(row['tpot_ms'].get('median'))} / {_f(row['tpot_ms'].get('p99'))}",
                _f(row.get("cost_per_mtok_output_usd"), 2),
            ])  # fmt: skip
    profiles = sorted({r.summary["profile"]["name"] for r in runs})
    out = [f"# Comparison of {len(runs)} runs", ""]
    if len(profiles) > 1:
        out += [f"Note: the runs used different profiles ({', '.join(profiles)}).", ""]
    out += [*_table(COMPARE_HEADER, rows), ""]
    return "\n".join(out)


def write_compare(runs: Sequence[StoredRun], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = plots.throughput_latency([(r.label, r.levels) for r in runs])
    png = plots.save(fig, out_dir / plots.THROUGHPUT_LATENCY)
    md = out_dir / "compare.md"
    md.write_text(compare_markdown(runs) + f"\n![throughput vs latency]({plots.THROUGHPUT_LATENCY})\n")
    return [md, png]
