"""`flashfleet timeline RUN_DIR`: the bring-up Gantt chart (PNG) of a run, the slowest phase of
each host as text, and each server's own startup timings (load, JIT, CUDA graphs, readiness) as
SGLang printed them on its node."""

from __future__ import annotations

import argparse
from pathlib import Path

from flashfleet.cli.common import UsageError, writable_file


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("timeline", help="chart where a bring-up run's time went, per host and phase")
    p.add_argument("run_dir", type=Path, help="run directory (with events.jsonl), or the events.jsonl")
    p.add_argument("-o", "--output", type=Path, default=None, help="PNG path (default: RUN_DIR/timeline.png)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from flashfleet.bringup.timeline import build_timeline, instance_labels, read_events, timeline_figure

    events = args.run_dir if args.run_dir.is_file() else args.run_dir / "events.jsonl"
    if not events.is_file():
        raise UsageError(f"{args.run_dir}: no events.jsonl (a run directory of configure/up)")
    try:
        timeline = build_timeline(read_events(events))
    except (ValueError, KeyError) as err:
        raise UsageError(f"{events}: not an event log ({err})") from None
    if not timeline.spans:
        raise UsageError(f"{events}: no task ran, nothing to chart")
    png = writable_file(args.output, "--output") if args.output else events.with_name("timeline.png")
    # The run's inventory (beside its events) names each cluster instance's row.
    recorded = events.with_name("inventory.json")
    try:
        labels = instance_labels(json.loads(recorded.read_text())) if recorded.is_file() else {}
    except (OSError, ValueError, AttributeError):
        labels = {}
    timeline_figure(timeline, labels).savefig(png, dpi=110)
    for host in timeline.hosts:
        spans = [s for s in timeline.spans if s.host == host and not s.background]
        slowest = max(spans, key=lambda s: s.duration)
        took = max(s.end for s in spans) - min(s.start for s in spans)
        print(f"{labels.get(host, host)}: {took:.1f}s, slowest phase {slowest.phase} {slowest.duration:.1f}s")
        for container, timings in timeline.startup.get(host, {}).items():
            print(f"  {container}, the server's own log: {timings.line()}")
    print(f"timeline: {png}")
    return 0
