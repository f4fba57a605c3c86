"""The shipped example bring-up log stays what `timeline` reads, and stays scrubbed."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from flashfleet.bringup.timeline import build_timeline, read_events
from flashfleet.cli import main

REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "examples" / "bringup" / "events.jsonl"


def _scrubber():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "example_timeline", REPO / "scripts" / "example_timeline.py"
    )
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_is_a_real_two_host_prepare() -> None:
    timeline = build_timeline(read_events(EXAMPLE))
    assert timeline.playbook == "prepare.yml"
    assert timeline.hosts == ["h200", "mi355x"]
    phases = {(s.host, s.phase) for s in timeline.spans if not s.background}
    assert {("h200", "nvidia_driver"), ("mi355x", "rocm_driver")} <= phases
    assert ("h200", "rocm_driver") not in phases
    assert ("mi355x", "nvidia_driver") not in phases
    for host in timeline.hosts:  # the weights download runs in the background on each host
        assert any(s.host == host and s.phase == "model_weights" and s.background for s in timeline.spans)
    assert not any(s.failed for s in timeline.spans)
    assert 10 < timeline.total < 3600


def test_the_example_holds_no_address_path_or_output() -> None:
    text = EXAMPLE.read_text()
    assert not re.search(r"\b\d{1,3}(\.\d{1,3}){3}\b", text)
    assert not re.search(r'"/(work|tmp|root|home|var|etc|usr)/', text)
    allowed = set(_scrubber().DATA_KEYS) | {"res"}
    for line in text.splitlines():
        event = json.loads(line)
        assert set(event) == {"event", "created", "event_data"}
        assert set(event["event_data"]) <= allowed, event


def test_scrub_drops_what_the_timeline_does_not_read() -> None:
    raw = {
        "event": "runner_on_ok", "created": "2026-12-02T15:01:42+00:00", "stdout": "ok: [10.0.0.7]",
        "event_data": {
            "playbook": "/srv/checkout/playbooks/prepare.yml", "host": "node-0", "remote_addr": "10.0.0.7",
            "task": "Driver | install", "role": "nvidia_driver", "task_path": "/srv/checkout/roles/x.yml:3",
            "start": "2026-12-02T15:01:40+00:00", "end": "2026-12-02T15:01:42+00:00",
            "res": {"changed": True, "stdout": "secret-ish", "results": [{"ansible_job_id": "j1", "started": 1,
                                                                           "finished": 0, "cmd": "x"}]},
        },
    }  # fmt: skip
    scrubbed = _scrubber().scrub(raw)
    assert scrubbed == {
        "event": "runner_on_ok", "created": "2026-12-02T15:01:42+00:00",
        "event_data": {
            "playbook": "prepare.yml", "host": "node-0", "task": "Driver | install", "role": "nvidia_driver",
            "start": "2026-12-02T15:01:40+00:00", "end": "2026-12-02T15:01:42+00:00",
            "res": {"changed": True, "results": [{"ansible_job_id": "j1", "started": 1, "finished": 0}]},
        },
    }  # fmt: skip
    assert _scrubber().scrub({"event": "runner_on_start", "event_data": {"host": "node-0"}}) is None


def test_timeline_charts_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "t.png"
    assert main(["timeline", str(EXAMPLE.parent), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["h200", "mi355x"]
    assert all("slowest phase" in line for line in lines[:2])
