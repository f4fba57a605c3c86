"""A server's own startup timings, read from the lines SGLang 0.5.23 prints (the summary of
srt/entrypoints/engine.py, the "fired up" line of srt/entrypoints/http_server.py), as the
sglang_serve role reads them from the unit's journal, and shown by `flashfleet timeline`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.startup_timings import TASK, parse_startup, startup_from_events
from flashfleet.bringup.timeline import build_timeline
from flashfleet.cli import main

UNIT = "gpu-0 docker[4242]:"
# the summary as srt/entrypoints/engine.py formats it (load_weight, kv_cache_allocation,
# scheduler_e2e, the six cuda_graph phases of srt/model_executor/graph_memory_usage.py, tokenizer_e2e)
SUMMARY = (
    "Engine startup timings (s): load_weight=228.09, kv_cache_allocation=0.44, scheduler_e2e=412.50, "
    "cuda_graph={prefill=64.55, decode=4.58, target_verify=0.00, draft_prefill=0.00, draft_decode=1.20, "
    "draft_extend=0.00}, tokenizer_e2e=425.10"
)
JOURNAL = [
    f"2026-12-04T18:40:00.000000+0000 {UNIT} [2026-12-04 18:40:00 TP0] Load weight begin. avail mem=139.50 GB",
    f"2026-12-04T18:47:05.250000+0000 {UNIT} [2026-12-04 18:47:05] {SUMMARY}",
    f"2026-12-04T18:47:17.750000+0000 {UNIT} [2026-12-04 18:47:17] The server is fired up and ready to roll!",
]


def test_the_summary_and_the_ready_line_give_each_phase() -> None:
    t = parse_startup(JOURNAL)
    assert t is not None
    assert (t.load_s, t.kv_cache_s, t.scheduler_s, t.engine_s) == (228.09, 0.44, 412.50, 425.10)
    assert t.capture_s == pytest.approx(64.55 + 4.58 + 1.20)
    # what the scheduler spent beyond the load, the KV cache and the captures
    assert t.jit_s == pytest.approx(412.50 - 228.09 - 0.44 - 70.33, abs=0.01)
    assert t.ready_s == 12.5  # from the summary's journal stamp to "fired up"'s
    line = t.line()
    assert "load 228.1 s" in line
    assert "CUDA graphs 70.3 s" in line
    assert "ready 12.5 s later" in line


def test_the_last_start_wins_and_a_start_not_yet_ready_says_so() -> None:
    again = [
        *JOURNAL,
        f"2026-12-04T19:00:00.000000+0000 {UNIT} [2026-12-04 19:00:00] {SUMMARY.replace('load_weight=228.09', 'load_weight=30.00')}",
    ]
    t = parse_startup(again)
    assert t is not None
    assert t.load_s == 30.0
    assert t.ready_s is None  # the earlier start's "fired up" is not this one's
    assert "ready unknown" in t.line()


def test_sglangs_own_prefix_dates_the_lines_without_a_journal() -> None:
    t = parse_startup([line.split(f"{UNIT} ", 1)[1] for line in JOURNAL])
    assert t is not None
    assert t.ready_s == 12.0


@pytest.mark.parametrize(
    "lines",
    [
        [],
        [JOURNAL[0]],  # an older image prints no summary
        [JOURNAL[2]],
        [SUMMARY.replace("cuda_graph={", "cuda_graph=(")],  # not the format 0.5.23 prints
    ],
)
def test_no_summary_means_no_timings(lines: list[str]) -> None:
    assert parse_startup(lines) is None


def _event(host: str, unit: str, lines: list[str], event: str = "runner_on_ok") -> dict[str, Any]:
    cmd = ["journalctl", f"_SYSTEMD_UNIT={unit}.service", "_SYSTEMD_INVOCATION_ID=0f3c", "--no-pager"]
    return {
        "event": event,
        "event_data": {
            "host": host,
            "role": "sglang_serve",
            # Ansible templates a looped include's task name once, with the first host's vars
            "task": f"{TASK}: some other host's process",
            "start": "2026-12-04T18:47:20+00:00",
            "end": "2026-12-04T18:47:21+00:00",
            "res": {"changed": False, "cmd": cmd, "stdout": "\n".join(lines), "stdout_lines": lines, "rc": 0},
        },
    }


def test_the_events_of_a_run_give_each_hosts_servers(tmp_path: Path, capsys: Any) -> None:
    events = [
        {"event": "playbook_on_start", "event_data": {"playbook": "site.yml"}},
        _event("node-0", "flashfleet-prefill", JOURNAL),
        _event("node-0", "flashfleet-decode", []),  # printed nothing: no entry
        _event("node-1", "flashfleet-server", JOURNAL, event="runner_on_failed"),  # not a reading
    ]
    found = startup_from_events(events)
    assert list(found) == ["node-0"]
    assert list(found["node-0"]) == ["flashfleet-prefill"]  # named by the unit, not the task
    assert build_timeline(events).startup == found
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["timeline", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  flashfleet-prefill, the server's own log: load 228.1 s, init/JIT/autotune 113.6 s" in out
