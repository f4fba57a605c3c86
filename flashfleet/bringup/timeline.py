"""Bring-up timeline: where the time of a playbook run went, per host and phase (role).

Reads the run's `events.jsonl` (ansible-runner events, one JSON object a line) and draws a
Gantt chart: one row per host, one bar per contiguous phase. Pure apart from matplotlib (Agg,
no pyplot state), so the CLI, the Pulumi provider and the tests share it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flashfleet.bringup.startup_timings import StartupTimings, startup_from_events

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RESULT_EVENTS = {"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"}
_BAD = {"runner_on_failed", "runner_on_unreachable"}


def phase_of(event_data: Mapping[str, Any]) -> str:
    """The phase a task belongs to: its role, else facts gathering, else the task's own prefix."""
    role = str(event_data.get("role") or "")
    if role:
        return role
    task = str(event_data.get("task") or "")
    if task == "Gathering Facts":
        return "facts"
    prefix, sep, _ = task.partition(" | ")
    return prefix.strip().lower() if sep else "tasks"


@dataclass(frozen=True)
class Span:
    host: str
    phase: str
    start: float  # seconds since the run's first task started
    end: float
    tasks: int
    changed: int
    failed: bool
    # a job a task started with `async` and `poll: 0` (the weights download), from its start to
    # the end of the last task of its phase (the wait): drawn as a thin bar under the host's row
    background: bool = False

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    playbook: str
    spans: list[Span]
    # host -> container -> the server's own startup timings (read from its journal by sglang_serve)
    startup: dict[str, dict[str, StartupTimings]] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(s.host for s in self.spans))

    @property
    def phases(self) -> list[str]:
        return list(dict.fromkeys(s.phase for s in self.spans))

    @property
    def total(self) -> float:
        return max((s.end for s in self.spans), default=0.0)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def read_events(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def build_timeline(events: Iterable[Mapping[str, Any]]) -> Timeline:
    """Merges consecutive task results of one host and one phase into spans."""
    events = list(events)
    playbook, results = "", []
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") == "playbook_on_start":
            playbook = str(data.get("playbook") or "")
        elif event.get("event") in RESULT_EVENTS and data.get("host") and data.get("start"):
            end = data.get("end") or event.get("created") or data["start"]
            results.append((str(data["host"]), _ts(data["start"]), _ts(end), event, data))
    if not results:
        return Timeline(playbook, [])
    origin = min(r[1] for r in results)
    open_span: dict[str, dict[str, Any]] = {}
    spans: list[Span] = []
    launched: dict[tuple[str, str], float] = {}  # (host, phase) -> start of its first async job
    for host, start, end, event, data in sorted(results, key=lambda r: r[1]):
        phase = phase_of(data)
        if _starts_async_job(data.get("res") or {}):
            launched.setdefault((host, phase), start - origin)
        current = open_span.get(host)
        if current is None or current["phase"] != phase:
            if current is not None:
                spans.append(Span(**current))
            current = open_span[host] = {
                "host": host, "phase": phase, "start": start - origin, "end": end - origin,
                "tasks": 0, "changed": 0, "failed": False,
            }  # fmt: skip
        current["end"] = max(current["end"], end - origin)
        current["tasks"] += 1
        current["changed"] += int(bool((data.get("res") or {}).get("changed")))
        current["failed"] = current["failed"] or (event["event"] in _BAD and not data.get("ignore_errors"))
    spans += [Span(**s) for s in open_span.values()]
    for (host, phase), start in launched.items():
        end = max(s.end for s in spans if s.host == host and s.phase == phase)
        spans.append(Span(host, phase, start, end, 0, 0, False, background=True))
    return Timeline(playbook, sorted(spans, key=lambda s: (s.host, s.start)), startup_from_events(events))


def _starts_async_job(res: Mapping[str, Any]) -> bool:
    """A result (or a looped result's item) that started a background job and did not wait."""
    items = [res, *(r for r in res.get("results") or [] if isinstance(r, Mapping))]
    return any(i.get("ansible_job_id") and i.get("started") and not i.get("finished") for i in items)


def instance_labels(inventory: Mapping[str, Any]) -> dict[str, str]:
    """Each host's row label in a cluster: the host and the instances it runs (replica-0+router);
    hosts of a stack of one instance keep their names."""
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    labels = {}
    for host, facts in hosts.items():
        names = [p.get("instance") for p in facts.get("flashfleet_processes") or [] if p.get("instance")]
        if names:
            labels[host] = f"{host} ({'+'.join(dict.fromkeys(names))})"
    return labels


def timeline_figure(timeline: Timeline, labels: Mapping[str, str] | None = None) -> Figure:
    """One row per host (first host on top), one coloured bar per phase; failed spans hatched."""
    # matplotlib only when a chart is drawn: progress and every refusal import this module
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    hosts = timeline.hosts
    fig = Figure(figsize=(11, 1.2 + 0.6 * max(len(hosts), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = {p: f"C{i % 10}" for i, p in enumerate(timeline.phases)}
    row = {h: len(hosts) - 1 - i for i, h in enumerate(hosts)}
    total = timeline.total or 1.0
    for span in timeline.spans:
        if span.background:
            ax.barh(
                row[span.host] - 0.42, span.duration, left=span.start, height=0.18,
                color=colors[span.phase], edgecolor="black", linewidth=0.4, alpha=0.7,
            )  # fmt: skip
            ax.text(span.start, row[span.host] - 0.42, f" {span.phase} (background)",
                    ha="left", va="center", fontsize=6, clip_on=True)  # fmt: skip
            continue
        ax.barh(
            row[span.host], span.duration, left=span.start, height=0.6, color=colors[span.phase],
            edgecolor="black", linewidth=0.5, hatch="//" if span.failed else None,
            label=f"{span.host}:{span.phase}",
        )  # fmt: skip
        if span.duration > 0.06 * total:
            ax.text(span.start + span.duration / 2, row[span.host], span.phase,
                    ha="center", va="center", fontsize=7, clip_on=True)  # fmt: skip
    ax.set_yticks([row[h] for h in hosts], [(labels or {}).get(h, h) for h in hosts])
    ax.set_xlabel("seconds since the first task")
    ax.set_xlim(0, total * 1.02)
    title = f"bring-up timeline: {timeline.playbook or 'playbook'} ({timeline.total:.0f} s)"
    ax.set_title(title)
    handles = [Patch(facecolor=colors[p], edgecolor="black", label=p) for p in timeline.phases]
    if any(s.failed for s in timeline.spans):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="failed"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def write_timeline(events_log: Path, png: Path | None = None) -> Path:
    """Draws `events_log` into `png` (default: timeline.png beside it); returns the PNG's path."""
    png = png or events_log.with_name("timeline.png")
    timeline_figure(build_timeline(read_events(events_log))).savefig(png, dpi=110)
    return png
