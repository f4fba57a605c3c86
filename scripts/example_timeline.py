"""Writes examples/bringup/events.jsonl: a real bring-up's event log, for trying `timeline` offline.

The log is the prepare phase (drivers, container runtime, image, weights) of an H200 and an
MI355X test host converged together, as tests/roles/test_site_prepare.py runs it. Make one and
keep its run directory, then scrub it into the example:

    FLASHFLEET_TEST_RUNS_DIR=/some/dir uv run pytest \
        tests/roles/test_site_prepare.py::test_prepare_converges_h200_and_mi355x_together
    uv run python scripts/example_timeline.py /some/dir/001-all/events.jsonl

Scrubbing keeps only what `flashfleet timeline` reads (event kind, times, host name, role, task
name, changed, the async job markers), so no address, path, output or variable of the machine
that ran it leaves with the example.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "examples" / "bringup" / "events.jsonl"
sys.path.insert(0, str(REPO))
from flashfleet.bringup.timeline import RESULT_EVENTS  # noqa: E402

DATA_KEYS = ("playbook", "host", "role", "task", "start", "end", "ignore_errors")
JOB_KEYS = ("changed", "ansible_job_id", "started", "finished")


def _job(res: Mapping[str, Any]) -> dict[str, Any]:
    return {k: res[k] for k in JOB_KEYS if k in res}


def scrub(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The event as the timeline needs it, or None for an event the timeline never reads."""
    kind = event.get("event")
    if kind != "playbook_on_start" and kind not in RESULT_EVENTS:
        return None
    data = event.get("event_data") or {}
    kept: dict[str, Any] = {k: data[k] for k in DATA_KEYS if k in data}
    if "playbook" in kept:
        kept["playbook"] = Path(str(kept["playbook"])).name
    res = data.get("res") or {}
    if isinstance(res, Mapping):
        job = _job(res)
        items = [_job(r) for r in res.get("results") or [] if isinstance(r, Mapping)]
        if items:
            job["results"] = items
        if job:
            kept["res"] = job
    return {"event": kind, "created": event.get("created"), "event_data": kept}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: example_timeline.py RUN_DIR/events.jsonl", file=sys.stderr)
        return 2
    lines = Path(argv[0]).read_text(encoding="utf-8").splitlines()
    events = [s for s in (scrub(json.loads(line)) for line in lines if line.strip()) if s]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in events), encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {len(events)} of {len(lines)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
