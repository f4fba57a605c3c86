"""The bring-up timeline: spans from an event log, and the figure drawn from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flashfleet.bringup import handoff
from flashfleet.bringup.project import Project
from flashfleet.bringup.timeline import build_timeline, read_events, timeline_figure
from flashfleet.cli import main

from .inventories import PROJECT, TOKEN

T0 = "2026-11-29T10:00:00"


def _at(seconds: float) -> str:
    return f"2026-11-29T10:{int(seconds) // 60:02d}:{seconds % 60:06.3f}+00:00"


def _result(host: str, role: str, start: float, end: float, event: str = "runner_on_ok",
            task: str = "Phase | task", changed: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"event": event, "event_data": {"host": host, "role": role, "task": task, "start": _at(start),
            "end": _at(end), "res": {"changed": changed}}}  # fmt: skip


EVENTS = [
    {"event": "playbook_on_start", "event_data": {"playbook": "site.yml"}},
    _result("n0", "", 0, 2, task="Gathering Facts"),
    _result("n1", "", 0, 3, task="Gathering Facts"),
    _result("n0", "preflight", 2, 5),
    _result("n0", "preflight", 5, 6, changed=True),
    _result("n1", "preflight", 3, 4),
    _result("n0", "sglang_serve", 6, 40, changed=True),
    _result("n1", "sglang_serve", 4, 10, event="runner_on_failed"),
]


def test_spans_merge_consecutive_tasks_of_a_phase_per_host() -> None:
    tl = build_timeline(EVENTS)
    assert tl.playbook == "site.yml"
    assert [(s.host, s.phase, s.start, s.end, s.tasks, s.changed, s.failed) for s in tl.spans] == [
        ("n0", "facts", 0, 2, 1, 0, False),
        ("n0", "preflight", 2, 6, 2, 1, False),
        ("n0", "sglang_serve", 6, 40, 1, 1, False),
        ("n1", "facts", 0, 3, 1, 0, False),
        ("n1", "preflight", 3, 4, 1, 0, False),
        ("n1", "sglang_serve", 4, 10, 1, 0, True),
    ]
    assert tl.total == 40


def test_figure_has_one_bar_per_host_and_phase_with_labels() -> None:
    fig = timeline_figure(build_timeline(EVENTS))
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == 6
    # first host on top: n0's bars sit on the upper row
    by_label = {c.get_label(): c.patches[0] for c in ax.containers}
    assert len(by_label) == 6
    assert by_label["n0:sglang_serve"].get_x() == 6
    assert by_label["n0:sglang_serve"].get_width() == 34
    assert by_label["n1:preflight"].get_width() == 1
    assert by_label["n0:facts"].get_y() > by_label["n1:facts"].get_y()
    assert by_label["n1:sglang_serve"].get_hatch() == "//"
    assert by_label["n0:sglang_serve"].get_hatch() is None
    assert by_label["n0:preflight"].get_facecolor() == by_label["n1:preflight"].get_facecolor()
    assert by_label["n0:preflight"].get_facecolor() != by_label["n0:facts"].get_facecolor()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["n0", "n1"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "facts",
        "preflight",
        "sglang_serve",
        "failed",
    ]
    assert ax.get_title() == "bring-up timeline: site.yml (40 s)"
    assert "sglang_serve" in [t.get_text() for t in ax.texts]  # wide bars carry their phase


def test_a_real_run_draws_its_timeline_and_the_cli_redraws_it(
    tmp_path: Path, two_local_nodes: dict[str, Any], capsys: Any
) -> None:
    result = handoff.run_recorded(
        "site.yml", two_local_nodes, project=Project(PROJECT), runs_root=tmp_path / "runs", hf_token=TOKEN
    )
    assert result.ok
    tl = build_timeline(read_events(result.events_log))
    assert sorted((s.host, s.phase) for s in tl.spans) == [
        ("node-0", "marker"), ("node-0", "marker_prep"), ("node-1", "marker"), ("node-1", "marker_prep")]  # fmt: skip
    assert (result.run_dir / "timeline.png").read_bytes().startswith(b"\x89PNG")

    out_png = tmp_path / "again.png"
    assert main(["timeline", str(result.run_dir), "-o", str(out_png)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("node-0: ")
    assert "slowest phase marker " in printed[0]
    assert printed[-1] == f"timeline: {out_png}"
    assert out_png.read_bytes().startswith(b"\x89PNG")


def test_timeline_cli_refuses_a_directory_without_events(tmp_path: Path, capsys: Any) -> None:
    assert main(["timeline", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"flashfleet timeline: {tmp_path}: no events.jsonl (a run directory of configure/up)"
    )
    (tmp_path / "events.jsonl").write_text(
        json.dumps({"event": "playbook_on_start", "event_data": {}}) + "\n"
    )
    assert main(["timeline", str(tmp_path)]) == 2
    assert "no task ran" in capsys.readouterr().err


def test_a_background_job_spans_from_its_start_to_its_wait() -> None:
    """The weights download started with async/poll 0 runs under the driver and image phases."""
    start = _result("n0", "model_weights", 1, 2, changed=True)
    start["event_data"]["res"]["results"] = [{"ansible_job_id": "j1", "started": 1, "finished": 0}]
    events = [
        start,
        _result("n0", "nvidia_driver", 2, 30),
        _result("n0", "sglang_image", 30, 50),
        _result("n0", "model_weights", 50, 70),  # the wait
    ]
    timeline = build_timeline(events)
    [bg] = [s for s in timeline.spans if s.background]
    assert (bg.phase, bg.start, bg.end) == ("model_weights", 0.0, 69.0)
    # a task that waited for its own job (poll > 0) starts no background span
    start["event_data"]["res"]["results"][0]["finished"] = 1
    assert not [s for s in build_timeline(events).spans if s.background]
    timeline_figure(timeline)  # draws


def test_one_background_job_per_node_is_drawn_too() -> None:
    """model_weights starts one job per node (not a loop): the unlooped result has the same shape."""
    start = _result("n0", "model_weights", 1, 2)
    start["event_data"]["res"].update({"ansible_job_id": "j1", "started": True, "finished": False})
    events = [start, _result("n0", "nvidia_driver", 2, 30), _result("n0", "model_weights", 30, 40)]
    [bg] = [s for s in build_timeline(events).spans if s.background]
    assert (bg.phase, bg.start, bg.end) == ("model_weights", 0.0, 39.0)


def test_a_cluster_rows_name_the_instances_each_host_runs():
    from flashfleet.bringup.timeline import instance_labels
    from flashfleet.inventory import build_inventory
    from flashfleet.planning import load_stack

    inv = build_inventory(
        load_stack("mi355x-replicas"), ["192.0.2.10", "192.0.2.11"], ["10.1.0.10", "10.1.0.11"]
    )
    assert instance_labels(inv) == {
        "mi355x-replicas-node-0": "mi355x-replicas-node-0 (replica-0+router)",
        "mi355x-replicas-node-1": "mi355x-replicas-node-1 (replica-1)",
    }
    single = build_inventory(load_stack("mi355x-throughput"), ["192.0.2.10"], ["10.1.0.10"])
    assert instance_labels(single) == {}
