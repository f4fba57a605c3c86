"""A server's own startup timings, read back from its journal after a bring-up.

SGLang 0.5.23 prints one summary line once every scheduler rank is up (srt/entrypoints/engine.py,
`Engine._set_startup_time`), each figure the slowest rank's:

    Engine startup timings (s): load_weight=228.09, kv_cache_allocation=0.44, scheduler_e2e=243.89,
    cuda_graph={prefill=64.55, decode=4.58, target_verify=0.00, ...}, tokenizer_e2e=257.64

and, after its warm-up request, ``The server is fired up and ready to roll!``
(srt/entrypoints/http_server.py). The sglang_serve role reads both lines of the unit's current
start (`journalctl --output=short-iso-precise`) and the timeline takes them from the run's
events. What the scheduler's start spent beyond the load, the KV cache and the graph captures is
its initialisation, JIT builds and autotune: shown as one figure, ``jit_s``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

TASK = "Ready | the server's own startup timings"  # the sglang_serve task that reads them

_NUM = r"(\d+(?:\.\d+)?)"
_SUMMARY = re.compile(
    rf"Engine startup timings \(s\): load_weight={_NUM}, kv_cache_allocation={_NUM}, "
    rf"scheduler_e2e={_NUM}, cuda_graph=\{{(?P<graphs>[^}}]*)\}}, tokenizer_e2e={_NUM}"
)
_GRAPH = re.compile(rf"(\w+)={_NUM}")
_READY = "The server is fired up and ready to roll!"
# journalctl --output=short-iso-precise ("2026-12-04T18:40:00.123456+0000 host unit[pid]: ..."),
# else SGLang's own prefix ("[2026-12-04 18:40:00 TP0] ...", `docker logs`): the first wins.
_STAMP = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?) "
    r"|^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)[ \]]"
)


@dataclass(frozen=True)
class StartupTimings:
    """One server's start, in seconds, as SGLang measured it."""

    load_s: float  # the weights into GPU memory (target and draft)
    kv_cache_s: float
    capture_s: float  # every CUDA-graph capture, summed over its phases
    scheduler_s: float  # the scheduler's whole start
    engine_s: float  # from the engine's start to the schedulers ready
    ready_s: float | None  # from the summary to "fired up" (the warm-up request); None: not seen

    @property
    def jit_s(self) -> float:
        """The scheduler's start less what it names: initialisation, JIT builds and autotune."""
        return max(0.0, round(self.scheduler_s - self.load_s - self.kv_cache_s - self.capture_s, 2))

    def line(self) -> str:
        ready = "unknown" if self.ready_s is None else f"{self.ready_s:.1f} s"
        return (
            f"load {self.load_s:.1f} s, init/JIT/autotune {self.jit_s:.1f} s, CUDA graphs "
            f"{self.capture_s:.1f} s, KV cache {self.kv_cache_s:.1f} s; then ready {ready} later "
            f"({self.engine_s:.1f} s from the engine's start)"
        )


def _stamp(line: str) -> datetime | None:
    match = _STAMP.match(line)
    if match is None:
        return None
    try:
        return datetime.fromisoformat((match.group(1) or match.group(2)).replace(",", "."))  # +0000 too
    except ValueError:
        return None


def parse_startup(lines: Iterable[str]) -> StartupTimings | None:
    """The last start in `lines` (a unit's journal), or None when no summary line is there."""
    summary: tuple[re.Match[str], datetime | None] | None = None
    ready_at: datetime | None = None
    for line in lines:
        match = _SUMMARY.search(line)
        if match is not None:
            summary, ready_at = (match, _stamp(line)), None
        elif _READY in line and summary is not None:
            ready_at = _stamp(line)
    if summary is None:
        return None
    match, at = summary
    graphs = sum(float(v) for _, v in _GRAPH.findall(match.group("graphs")))
    ready = None
    if at is not None and ready_at is not None:
        ready = max(0.0, round((ready_at - at).total_seconds(), 3))
    return StartupTimings(
        load_s=float(match.group(1)),
        kv_cache_s=float(match.group(2)),
        capture_s=round(graphs, 2),
        scheduler_s=float(match.group(3)),
        engine_s=float(match.group(5)),
        ready_s=ready,
    )


def _unit(res: Mapping[str, Any]) -> str | None:
    """The container the reading is of: the unit its journalctl matched (`_SYSTEMD_UNIT=`), since
    Ansible templates a task's name once for every host."""
    cmd = res.get("cmd")
    words = cmd if isinstance(cmd, list) else str(cmd or "").split()
    for word in words:
        if str(word).startswith("_SYSTEMD_UNIT="):
            return str(word).removeprefix("_SYSTEMD_UNIT=").removesuffix(".service")
    return None


def startup_from_events(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, StartupTimings]]:
    """host -> container name -> its timings, from a run's ansible-runner events."""
    out: dict[str, dict[str, StartupTimings]] = {}
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") != "runner_on_ok" or not str(data.get("task") or "").startswith(TASK):
            continue
        res = data.get("res") or {}
        unit = _unit(res)
        timings = parse_startup(res.get("stdout_lines") or str(res.get("stdout") or "").splitlines())
        if unit is not None and timings is not None:
            out.setdefault(str(data.get("host")), {})[unit] = timings
    return out


def latest_startup(runs_root: Path, stack: str, newest: int = 10) -> tuple[str, list[StartupTimings]] | None:
    """The newest run of `stack` under `runs_root` whose servers reported their start: the run
    directory's name and every server's timings; None when none of the `newest` runs has any
    (`plan` reads no more: a teardown or a check run reports none)."""
    for run in sorted(runs_root.joinpath(stack).glob("*/events.jsonl"), reverse=True)[:newest]:
        try:
            with run.open(encoding="utf-8") as f:
                events = [json.loads(line) for line in f if TASK in line]
        except (OSError, ValueError):
            continue
        found = [t for by_name in startup_from_events(events).values() for t in by_name.values()]
        if found:
            return run.parent.name, found
    return None
