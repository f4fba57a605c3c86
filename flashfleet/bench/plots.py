"""PNG plots of one or several runs (matplotlib, Agg: no display needed).

The builders return the Figure, so callers (and tests) can read axes, labels and series before
``save`` writes the PNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from flashfleet.bench.summary import LevelSummary, sort_levels

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PARETO = "throughput_per_gpu_vs_tpot.png"
THROUGHPUT_LATENCY = "throughput_latency.png"
LATENCY_PERCENTILES = "latency_percentiles.png"
PERCENTILES = (("median", "p50"), ("p90", "p90"), ("p99", "p99"))


def _figure(width: float, height: float, ncols: int = 1) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    fig.subplots(1, ncols)
    return fig


def _conc_label(level: LevelSummary) -> str:
    return "∞" if level.concurrency is None else str(level.concurrency)


def throughput_latency(runs: Sequence[tuple[str, Sequence[LevelSummary]]]) -> Figure:
    """Output throughput against median TPOT, one line per run, points labelled by concurrency."""
    fig = _figure(7.5, 5)
    ax = fig.axes[0]
    for label, levels in runs:
        pts = [lv for lv in sort_levels(levels) if lv.tpot_ms.median is not None]
        xs = [lv.tpot_ms.median or 0.0 for lv in pts]  # None filtered out above
        ys = [lv.output_throughput for lv in pts]
        (line,) = ax.plot(xs, ys, marker="o", label=label)
        for lv, x, y in zip(pts, xs, ys, strict=True):
            ax.annotate(f"c={_conc_label(lv)}", (x, y), textcoords="offset points", xytext=(4, 4),
                        fontsize=8, color=line.get_color())  # fmt: skip
    ax.set_xlabel("median TPOT (ms)")
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_title("Throughput vs latency across concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def pareto(runs: Sequence[tuple[str, Sequence[LevelSummary], int | None]]) -> Figure:
    """The usual Pareto view: output throughput per GPU against p50 TPOT (per-user speed), one
    point per concurrency. A run whose GPU count is unknown is drawn per cluster and says so."""
    fig = _figure(7.5, 5)
    ax = fig.axes[0]
    unknown = False
    for label, levels, gpus in runs:
        pts = [lv for lv in sort_levels(levels) if lv.tpot_ms.median is not None]
        xs = [lv.tpot_ms.median or 0.0 for lv in pts]
        ys = [lv.output_throughput / (gpus or 1) for lv in pts]
        unknown = unknown or not gpus
        name = label if gpus else f"{label} (GPU count unknown: whole cluster)"
        (line,) = ax.plot(xs, ys, marker="o", label=name)
        for lv, x, y in zip(pts, xs, ys, strict=True):
            ax.annotate(f"c={_conc_label(lv)}", (x, y), textcoords="offset points", xytext=(4, 4),
                        fontsize=8, color=line.get_color())  # fmt: skip
    ax.set_xlabel("p50 TPOT (ms)")
    ax.set_ylabel("output throughput per GPU (tok/s/GPU)" if not unknown else "output throughput (tok/s)")
    ax.set_title("Throughput per GPU vs per-user latency, one point per concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def latency_percentiles(label: str, levels: Sequence[LevelSummary]) -> Figure:
    """TTFT and TPOT at p50/p90/p99 against concurrency (one panel each)."""
    fig = _figure(11, 4.5, ncols=2)
    ordered = [lv for lv in sort_levels(levels) if lv.concurrency is not None]
    xs = [lv.concurrency or 0 for lv in ordered]  # None filtered out above
    for ax, metric, title in ((fig.axes[0], "ttft_ms", "TTFT"), (fig.axes[1], "tpot_ms", "TPOT")):
        for stat, name in PERCENTILES:
            ys = [getattr(getattr(lv, metric), stat) for lv in ordered]
            ax.plot(xs, [float("nan") if y is None else y for y in ys], marker="o", label=name)
        if len(set(xs)) > 1:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])  # the levels themselves, not powers of two
        ax.minorticks_off()
        ax.set_xlabel("max concurrency")
        ax.set_ylabel(f"{title} (ms)")
        ax.set_title(f"{title} percentiles")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(label)
    return fig


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
