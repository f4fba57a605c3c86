"""Markdown reports: one run (report.md beside its plots) and several runs lined up (compare)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flashfleet.bench import plots
from flashfleet.bench.store import REPORT, StoredRun
from flashfleet.table import markdown


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


LEVEL_HEADER = (
    "concurrency", "requests ok", "output tok/s", "tok/s per GPU", "req/s", "TTFT p50 / p90 / p99 (ms)",
    "TPOT p50 / p90 / p99 (ms)", "ITL p50 / p90 / p99 (ms)", "e2e p50 / p90 / p99 (ms)",
    "agentic 1/p90(e2e/len)", "$ / M output tok",
)  # fmt: skip


def _level_cells(row: dict[str, Any]) -> list[str]:
    def pct(metric: str, stats: Sequence[str]) -> str:
        return " / ".join(_f(row[metric].get(s)) for s in stats)

    conc = row["concurrency"] if row["concurrency"] is not None else "unlimited"
    ok = f"{row['completed']}/{row['num_prompts']}" if row.get("num_prompts") else str(row["completed"])
    p3 = ("median", "p90", "p99")
    return [
        str(conc), ok, _f(row["output_throughput"]), _f(row.get("output_throughput_per_gpu")),
        _f(row["request_throughput"], 2), pct("ttft_ms", p3), pct("tpot_ms", p3), pct("itl_ms", p3),
        pct("e2e_latency_ms", p3), _f(row.get("agentic_rate"), 2), _f(row.get("cost_per_mtok_output_usd"), 2),
    ]  # fmt: skip


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


def verdict_lines(run: StoredRun) -> list[str]:
    s = run.summary
    if run.valid:
        return ["**Verdict: valid.** Every level completed all its requests with output tokens"
                + (", every server and rank was ready" if s.get("servers") else "")
                + (", and every worker behind the router served its share" if s.get("worker_shares") else "")
                + "."]  # fmt: skip
    reasons = s.get("verdict") or [f"concurrency {f['concurrency']}: {f['error']}" for f in s["failures"]]
    return ["**Verdict: NOT valid** (these figures measured nothing you can use):", "",
            *(f"- {r}" for r in reasons)]  # fmt: skip


def _cost_lines(cost: dict[str, Any] | None) -> list[str]:
    if not cost:
        why = "no price with a source for this instance type"
        fix = "set nodes.source.instance.priceUsdPerHour in the stack, or --hourly-price"
        return ["## Cost", "", f"Unknown: {why} ({fix}).", ""]
    per_gpu = cost.get("usd_per_gpu_hour")
    source = cost.get("price_source") or "given on the command line"
    when = f", {cost['price_date']}" if cost.get("price_date") else ""
    return [
        "## Cost",
        "",
        f"- ${cost['hourly_usd']:.2f}/hour ({cost['node_count']} x ${cost['hourly_usd_per_node']:.2f}"
        + (f" + the router's node ${router:.4f}" if (router := cost.get("router_hourly_usd")) else "")
        + (f"; ${per_gpu:.3f} per GPU-hour" if per_gpu is not None else "") + ")",
        f"- ${cost['run_usd']:.2f} for this run ({cost['wall_s']:.0f} s)",
        f"- ${_f(cost['per_mtok_output_usd'], 2)} per million output tokens over the run",
        f"- price source: {source}{when}",
        "",
    ]  # fmt: skip


def _failure_lines(s: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for failure in s["failures"]:
        out.append(f"- concurrency {failure['concurrency']} failed: {failure['error']} "
                   f"(raw/c{failure['concurrency']:04d}.log)")  # fmt: skip
        tail = failure.get("log_tail") or []
        if tail:
            out += ["", "  ```", *(f"  {line}" for line in tail), "  ```"]
    return [*out, ""] if out else []


def _server_counter_lines(s: dict[str, Any]) -> list[str]:
    """The servers' own counters per level: the prefix-cache hit rate beside the client's figures."""
    rows = [(r["concurrency"], r["server"]) for r in s["levels"] if r.get("server")]
    if not rows:
        return []
    out = ["## The servers' own counters, per level", "",
           "Deltas of each server's Prometheus counters over the level's measured requests.", ""]  # fmt: skip
    cells = []
    for concurrency, d in rows:
        rate = d.get("prefix_cache_hit_rate")
        cells.append([
            str(concurrency), _count(d.get("prompt_tokens")), _count(d.get("cached_tokens")),
            "unknown" if rate is None else f"{rate:.1%}", _count(d.get("generation_tokens")),
        ])  # fmt: skip
    header = (
        "concurrency",
        "prompt tokens",
        "cached prompt tokens",
        "prefix-cache hit rate",
        "generated tokens",
    )
    out += [*markdown(header, cells), ""]
    out += [f"- **warning** {w}" for w in s.get("warnings") or []]
    return [*out, ""] if s.get("warnings") else out


def _count(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f}"


def run_markdown(run: StoredRun) -> str:
    s = run.summary
    method = run.method or {}
    gpus = run.gpus
    out = [
        f"# Benchmark {s['stack']} / {run.path.name}: {s['profile']['name']}",
        "",
        *verdict_lines(run),
        "",
        *_failure_lines(s),
        "## Figures",
        "",
        s["profile"]["description"],
        "",
        f"Endpoint {s['endpoint']}, started {s['started_at']}, {s['wall_s']:.0f} s; "
        f"{gpus if gpus else 'unknown'} GPUs serving.",
        "",
        *markdown(LEVEL_HEADER, [_level_cells(r) for r in s["levels"]]),
        "",
        f"![throughput per GPU vs TPOT]({plots.PARETO})",
        "",
    ]
    out += _cost_lines(s.get("cost"))
    out += _server_counter_lines(s)
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
    if s.get("worker_shares"):
        out += ["## What each worker did during the run", ""]
        for url, d in s["worker_shares"].items():
            counts = {k: v for k, v in d.items() if k not in ("role", "instance")}
            out.append(f"- {d.get('instance') or d['role']} {url}: "
                       + ", ".join(f"{k.split(':')[-1]} +{v:,.0f}" for k, v in counts.items()))  # fmt: skip
        out.append("")
    out += ["## Method", ""]
    if method:
        out += [f"- {k}: {v}" for k, v in method.items() if v is not None]
    else:
        out.append("- not recorded")
    lg = run.fingerprint.get("load_generator") or {}
    if lg:
        image = f": {lg['image']} ({lg.get('image_digest') or 'digest unknown'})" if lg.get("image") else ""
        out.append(f"- load generator ran in {lg.get('ran_in')}{image}")
    out += ["", "## What was measured", "", *_fingerprint_lines(run.fingerprint), ""]
    out += [f"![throughput vs latency]({plots.THROUGHPUT_LATENCY})", "",
            f"![TTFT and TPOT percentiles]({plots.LATENCY_PERCENTILES})", ""]  # fmt: skip
    return "\n".join(out)


def write_report(run: StoredRun) -> list[Path]:
    """report.md and both plots into the run's directory; returns the files written."""
    levels = run.levels
    written = [
        plots.save(plots.pareto([(run.label, levels, run.gpus)]), run.path / plots.PARETO),
        plots.save(plots.throughput_latency([(run.label, levels)]), run.path / plots.THROUGHPUT_LATENCY),
        plots.save(plots.latency_percentiles(run.label, levels), run.path / plots.LATENCY_PERCENTILES),
    ]
    (run.path / REPORT).write_text(run_markdown(run))
    return [run.path / REPORT, *written]


COMPARE_HEADER = (
    "run", "valid", "badge", "instances", "concurrency", "output tok/s", "tok/s per GPU",
    "TTFT p50 / p99 (ms)", "TPOT p50 / p99 (ms)", "$ / M output tok",
)  # fmt: skip


def compare_markdown(
    runs: Sequence[StoredRun], method_differences: Sequence[str] = (), build_differences: Sequence[str] = ()
) -> str:
    rows = []
    for run in runs:
        fp, recipe = run.fingerprint, run.fingerprint.get("recipe") or {}
        instances = f"{fp.get('node_count', '?')} x {fp.get('instance_type') or '?'}"
        valid = "yes" if run.valid else "**FAILED**"
        if not run.summary["levels"]:
            rows.append([run.label, valid, str(recipe.get("badge", "-")), instances, *["-"] * 6])
        for row in run.summary["levels"]:
            rows.append([
                run.label, valid, str(recipe.get("badge", "-")), instances,
                str(row["concurrency"] if row["concurrency"] is not None else "unlimited"),
                _f(row["output_throughput"]), _f(row.get("output_throughput_per_gpu")),
                f"{_f(row['ttft_ms'].get('median'))} / {_f(row['ttft_ms'].get('p99'))}",
                f"{_f(row['tpot_ms'].get('median'))} / {_f(row['tpot_ms'].get('p99'))}",
                _f(row.get("cost_per_mtok_output_usd"), 2),
            ])  # fmt: skip
    profiles = sorted({r.summary["profile"]["name"] for r in runs})
    out = [f"# Comparison of {len(runs)} runs", ""]
    failed = [r.label for r in runs if not r.valid]
    if failed:
        out += [
            f"**Not valid, shown for reference only:** {', '.join(failed)} (see each run's report.md).",
            "",
        ]
    if method_differences:
        out += ["**The runs were measured differently** (compared anyway, as asked):", "",
                *(f"- {d}" for d in method_differences), ""]  # fmt: skip
    elif len(profiles) > 1:
        out += [f"Note: the runs used different profiles ({', '.join(profiles)}).", ""]
    if build_differences:
        out += ["**The runs served different bytes** (compared anyway, as asked):", "",
                *(f"- {d}" for d in build_differences), ""]  # fmt: skip
    out += [*markdown(COMPARE_HEADER, rows), ""]
    return "\n".join(out)


def write_compare(
    runs: Sequence[StoredRun],
    out_dir: Path,
    method_differences: Sequence[str] = (),
    build_differences: Sequence[str] = (),
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = plots.pareto([(r.label, r.levels, r.gpus) for r in runs])
    png = plots.save(fig, out_dir / plots.PARETO)
    md = out_dir / "compare.md"
    md.write_text(
        compare_markdown(runs, method_differences, build_differences)
        + f"\n![throughput per GPU vs TPOT]({plots.PARETO})\n"
    )
    return [md, png]
