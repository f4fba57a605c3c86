"""Progress lines per host and phase, from ansible-runner's raw events.

One line when a host enters a phase (role), one when it leaves it (with its time and counts),
and one at once for every failed or unreachable task. Lines go to a callback (the terminal,
or the Pulumi engine through the provider's stderr) and to the run's `progress.log`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from flashfleet.bringup.playbook_run import failure_message, split_task_name
from flashfleet.bringup.timeline import RESULT_EVENTS, phase_of


@dataclass
class _Phase:
    name: str
    started: float
    last: float
    tasks: int = 0
    changed: int = 0
    failed: int = 0


@dataclass
class PhaseProgress:
    emit: Callable[[str], None] | None = None
    log: TextIO | None = None
    clock: Callable[[], float] = time.monotonic
    _open: dict[str, _Phase] = field(default_factory=dict)

    def line(self, text: str) -> None:
        if self.emit is not None:
            self.emit(text)
        if self.log is not None:
            self.log.write(text + "\n")
            self.log.flush()

    def _close(self, host: str) -> None:
        phase = self._open.pop(host, None)
        if phase is None:
            return
        took = phase.last - phase.started  # up to its last event, not to when it is noticed
        verdict = "FAILED" if phase.failed else "done"
        self.line(
            f"[{host}] {phase.name}: {verdict} in {took:.1f}s ({phase.tasks} tasks, {phase.changed} changed)"
        )

    def __call__(self, event: Mapping[str, Any]) -> None:
        name = str(event.get("event", ""))
        data = event.get("event_data") or {}
        host = str(data.get("host") or "")
        if not host or not (name == "runner_on_start" or name in RESULT_EVENTS):
            return
        phase, now = phase_of(data), self.clock()
        current = self._open.get(host)
        if current is None or current.name != phase:
            self._close(host)
            current = self._open[host] = _Phase(phase, now, now)
            self.line(f"[{host}] {phase} ...")
        current.last = now
        if name not in RESULT_EVENTS:
            return
        res = data.get("res") or {}
        current.tasks += 1
        current.changed += int(bool(res.get("changed")))
        if name in {"runner_on_failed", "runner_on_unreachable"} and not data.get("ignore_errors"):
            current.failed += 1
            what = "UNREACHABLE" if name == "runner_on_unreachable" else "FAILED"
            task = split_task_name(str(data.get("task", "")))[1]
            self.line(f"[{host}] {phase}: {what} {task}: {failure_message(res)}")

    def finish(self) -> None:
        for host in list(self._open):
            self._close(host)
