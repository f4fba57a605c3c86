"""`flashfleet plan`'s time to the first token: every phase from launch to the first answer, each
figure sourced or unknown, the first and the second bring-up of a stack side by side, and each
lever flipped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from flashfleet.catalog import bringup_catalog
from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.stack import list_stacks

Doc = dict[str, Any]
ORDER = ["launch", "driver", "image", "weights", "load", "jit", "capture", "ready"]
BASES = {"published", "estimate", "assumed"}
# what a source of a figure the product prints must never be: an internal reference
INTERNAL = re.compile(r"\bissue \d+\b(?! *\(|\S)|\bthis project's\b|\binternal\b|\bour own\b", re.IGNORECASE)


def _strings(node: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in _strings(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [s for i, v in enumerate(node) for s in _strings(v, f"{path}[{i}]")]
    return [(path, node)] if isinstance(node, str) else []


def _figures(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every table of the catalog that holds a number, with its path."""
    if not isinstance(node, dict):
        return []
    out = (
        [(path, node)]
        if any(isinstance(v, int | float) and not isinstance(v, bool) for v in node.values())
        else []
    )
    return out + [f for k, v in node.items() for f in _figures(v, f"{path}.{k}")]


def test_every_figure_of_the_bringup_catalog_is_sourced_and_no_source_is_internal() -> None:
    cat = bringup_catalog()
    for path, table in _figures(cat):
        if path.startswith(".schedule"):
            continue  # lanes, not figures
        assert table.get("source"), path
        if not path.startswith(".source."):  # the node sources' stated defaults: their own source line
            assert table.get("basis") in BASES, path
    # the GitHub issues of the projects cited ("sglang issue #3673") are public; an issue number
    # with nothing public around it is not
    for path, text in _strings(cat):
        assert not INTERNAL.search(text), (path, text)
        if "issue" in text.lower():
            assert re.search(r"\b(sglang|github\.com/\S+) (issue|PR) #\d+", text), (path, text)
    startup = cat["startup"]
    for name in ("capture", "ready"):
        assert "seconds" not in startup[name]
        assert startup[name]["source"].startswith("unknown"), name


@pytest.mark.parametrize("stack", list_stacks())
def test_plan_json_carries_the_time_to_first_token_of_every_catalog_stack(
    stack: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["plan", stack, "--format", "json", "--runs-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    t, cp = data["time_to_first_token"], data["critical_path"]
    kube = t["node_source"] == "kubernetes"
    assert [p["name"] for p in t["phases"]] == [n for n in ORDER if not (kube and n == "driver")]
    by = {p["name"]: p for p in t["phases"]}
    for p in t["phases"]:
        assert p["source"], p
        assert p["second_source"], p
        if p["first_s"] is None:
            assert p["basis"] is None, p
        else:
            assert p["basis"] in BASES, p
    for which in ("first", "second"):
        time = t[which]
        missing = [p["name"] for p in t["phases"] if p[f"{which}_s"] is None]
        assert time["unknown"] == missing
        assert (time["total_s"] is None) == bool(missing)
        # launch, then the critical path's lanes, then the phases after the transfers, one by one
        lanes = max(sum(by[n][f"{which}_s"] or 0 for n in lane) for lane in cp["lanes"])
        serial = sum(by[n][f"{which}_s"] or 0 for n in ["launch", "load", "jit", "capture", "ready"])
        assert time["known_s"] == pytest.approx(lanes + serial, abs=0.1)
        timed = {n: p[f"{which}_s"] for n, p in by.items() if p[f"{which}_s"]}
        assert time["dominant"] == max(timed, key=timed.__getitem__)
    # the transfers are the critical path's own figures
    for p in cp["phases"]:
        assert by[p["name"]]["first_s"] == p["seconds"]
    # the second bring-up never takes longer than the first
    assert t["second"]["known_s"] <= t["first"]["known_s"]
    assert t["levers"][0]["name"] == "weight_prefetch"


def test_an_aws_stack_pays_everything_again_and_loading_dominates() -> None:
    plan = load_stack("gb300-lowlat")
    t = time_to_first_token(plan, critical_path(plan))
    by = {p.name: p for p in t.phases}
    assert [by[n].second_s for n in ORDER] == [by[n].first_s for n in ORDER]
    assert by["launch"].first_s is None  # no public launch figure: unknown, not invented
    load = bringup_catalog()["startup"]["load"]
    assert by["load"].first_s == load["cold_s"]  # the FP8 checkpoint the figure was measured on
    assert by["load"].basis == "estimate"
    assert "pt9912/runpod-glm-flash" in by["load"].source
    assert t.first.dominant == "load"
    assert t.first.total_s is None
    assert t.first.unknown == ["launch", "capture", "ready"]
    assert t.first.known_s == pytest.approx(262.4 + 1128 + 180, abs=0.1)  # weights lane, load, autotune
    # the lever: prefetch cuts the load to the measured 216 s; the download then dominates
    prefetch = t.levers[0]
    assert (prefetch.setting, prefetch.other) == ("off", "on")
    assert prefetch.first.known_s == pytest.approx(262.4 + 216 + 180, abs=0.1)
    assert prefetch.first.dominant == "weights"
    assert prefetch.badge.startswith("Not Verified")


def test_prefetch_on_in_the_stack_file_models_the_faster_load(write_stack) -> None:
    def change(doc: Doc) -> None:
        doc["config"]["flashfleet:stack"]["options"] = {"weight_prefetch": "on"}

    plan = load_stack("broken", write_stack("h200-lowlat", change))
    t = time_to_first_token(plan, critical_path(plan))
    load = next(p for p in t.phases if p.name == "load")
    assert load.first_s == 216
    assert load.source.startswith("with checkpoint prefetch")
    assert plan.recipe.badge == "Not Verified"
    assert (t.levers[0].setting, t.levers[0].other) == ("on", "off")
    assert t.levers[0].first.known_s > t.first.known_s


def test_a_smaller_checkpoint_loads_in_proportion() -> None:
    plan = load_stack("mi355x-agentx")  # MXFP4 checkpoint
    t = time_to_first_token(plan, critical_path(plan))
    cat = bringup_catalog()
    size = cat["checkpoint"][plan.recipe.model]["size_gb"]
    load = next(p for p in t.phases if p.name == "load")
    assert load.first_s == pytest.approx(1128 * size / 328, abs=0.1)
    # no public figure for AMD's JIT builds: unknown
    assert next(p for p in t.phases if p.name == "jit").first_s is None


def test_existing_hosts_keep_image_driver_and_weights_for_the_second_bring_up(write_stack) -> None:
    plan = load_stack("mi355x-lowlat")
    t = time_to_first_token(plan, critical_path(plan))
    by = {p.name: p for p in t.phases}
    assert by["driver"].first_s == 600
    assert by["weights"].first_s == pytest.approx(328 * 8 / 1.0, abs=0.1)
    assert [by[n].second_s for n in ("driver", "image", "weights")] == [0, 0, 0]
    assert "keepCaches" in by["weights"].second_source
    assert by["load"].second_s == by["load"].first_s  # loaded cold again
    assert t.first.dominant == "weights"
    assert t.second.dominant == "load"
    assert t.second.known_s == pytest.approx(1128, abs=0.1)
    keep = next(lever for lever in t.levers if lever.name == "teardown.keepCaches")
    assert (keep.setting, keep.other) == ("true", "false")
    assert keep.second.known_s == pytest.approx(by["weights"].first_s + 1128, abs=0.1)

    # with keepCaches: false the stack itself downloads again, and the lever says what keeping saves
    def no_keep(doc: Doc) -> None:
        doc["config"]["flashfleet:stack"]["teardown"] = {"keepCaches": False}

    plan = load_stack("broken", write_stack("mi355x-lowlat", no_keep))
    t = time_to_first_token(plan, critical_path(plan))
    weights = next(p for p in t.phases if p.name == "weights")
    assert weights.second_s == weights.first_s
    assert next(
        lever for lever in t.levers if lever.name == "teardown.keepCaches"
    ).second.known_s == pytest.approx(1128, abs=0.1)


def test_kubernetes_with_a_host_path_cache_keeps_the_weights_and_the_image() -> None:
    plan = load_stack("mi355x-k8s")
    t = time_to_first_token(plan, critical_path(plan))
    by = {p.name: p for p in t.phases}
    assert by["weights"].first_s
    assert by["weights"].second_s == 0
    assert "hostPath" in by["weights"].second_source
    assert by["image"].second_s == 0
    assert [lever.name for lever in t.levers] == ["weight_prefetch", "caches.jit"]


def test_plan_text_shows_both_bring_ups_and_each_lever(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "mi355x-lowlat"]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if "time to first token modeled" in line)
    assert "first bring-up at least 62.5 min" in head
    assert "second (the stack again after `down`) at least 18.8 min" in head
    assert "dominant: weights" in head
    assert "unknown: jit, capture, ready" in head
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("    ") and "min" in line}
    assert rows["load"].split()[1:5] == ["18.8", "min", "18.8", "min"]
    assert (
        "lever weight_prefetch (recipe option) is off; on: first at least 47.3 min, second at least 3.6 min"
        in out
    )
    assert "lever teardown.keepCaches (stack file) is true; false:" in out


def _h200_on_a_host(doc: Doc) -> None:
    """h200-lowlat on an existing host of its own: NVIDIA, whose JIT time has a public figure."""
    stack = doc["config"]["flashfleet:stack"]
    stack["nodes"]["source"] = {
        "kind": "existing",
        "hosts": [
            {
                "address": "192.0.2.20",
                "sshUser": "ubuntu",
                "gpus": {"model": "h200", "count": 8},
                "hostMemoryGib": 2048,
            }
        ],
    }


def test_the_jit_cache_on_the_kept_volume_skips_the_builds_of_the_second_bring_up(write_stack) -> None:
    plan = load_stack("broken", write_stack("h200-lowlat", _h200_on_a_host))
    t = time_to_first_token(plan, critical_path(plan))
    jit = next(p for p in t.phases if p.name == "jit")
    cat = bringup_catalog()["startup"]["jit"]["nvidia"]
    assert (jit.first_s, jit.second_s) == (cat["first_s"], cat["cached_s"])
    assert "caches.jit: true" in jit.second_source
    assert t.second.known_s == pytest.approx(1128, abs=0.1)  # the load alone: everything else kept
    lever = next(lever for lever in t.levers if lever.name == "caches.jit")
    assert (lever.setting, lever.other) == ("true", "false")
    assert lever.badge.startswith("none")
    assert lever.first.known_s == t.first.known_s  # the first boot builds either way
    assert lever.second.known_s == pytest.approx(1128 + cat["first_s"], abs=0.1)
    # the cache is on the volume teardown.keepCaches: false deletes: built again
    keep = next(lever for lever in t.levers if lever.name == "teardown.keepCaches")
    assert keep.second.known_s == pytest.approx(t.first.known_s, abs=0.1)


def test_caches_jit_false_in_the_stack_file_builds_again(write_stack) -> None:
    def change(doc: Doc) -> None:
        _h200_on_a_host(doc)
        doc["config"]["flashfleet:stack"]["caches"] = {"jit": False}

    plan = load_stack("broken", write_stack("h200-lowlat", change))
    t = time_to_first_token(plan, critical_path(plan))
    jit = next(p for p in t.phases if p.name == "jit")
    assert jit.second_s == jit.first_s == 180
    assert "caches.jit is false" in jit.second_source
    lever = next(lever for lever in t.levers if lever.name == "caches.jit")
    assert (lever.setting, lever.other) == ("false", "true")
    assert lever.second.known_s == pytest.approx(t.second.known_s - 180, abs=0.1)
    # and the launch carries none of the cache variables
    assert all("TRITON_CACHE_DIR" not in launch.env for launch in plan.launches_by_node()[0])


def test_an_aws_restart_only_gains_from_the_jit_cache_and_says_why() -> None:
    plan = load_stack("gb300-lowlat")
    t = time_to_first_token(plan, critical_path(plan))
    jit = next(p for p in t.phases if p.name == "jit")
    assert jit.second_s == jit.first_s
    assert "new instance and volume" in jit.second_source
    lever = next(lever for lever in t.levers if lever.name == "caches.jit")
    assert lever.second.known_s == t.second.known_s


README_TTFT = re.compile(
    r"^\| (?P<stack>[\w-]+) \((?P<source>[^)]+)\) \| at least (?P<first>[\d.]+) min \| at least "
    r"(?P<second>[\d.]+) min \| (?P<dominant>\w+), (?P<dominant_min>[\d.]+) min \| at least "
    r"(?P<pf_first>[\d.]+) / (?P<pf_second>[\d.]+) min \|$",
    re.MULTILINE,
)


def test_the_readme_quotes_what_plan_models(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = list(README_TTFT.finditer(readme))
    stacks = [r["stack"] for r in rows]
    assert {"gb300-lowlat", "h200-lowlat"} <= set(stacks), stacks  # a GB300 and an H200 stack
    for row in rows:
        assert main(["plan", row["stack"], "--format", "json"]) == 0
        t = json.loads(capsys.readouterr().out)["time_to_first_token"]
        by = {p["name"]: p for p in t["phases"]}
        prefetch = t["levers"][0]

        def minutes(seconds: float) -> str:
            return f"{seconds / 60:.1f}"

        assert {"aws": "AWS", "existing": "existing hosts", "kubernetes": "Kubernetes"}[
            t["node_source"]
        ] == row["source"]
        assert (minutes(t["first"]["known_s"]), minutes(t["second"]["known_s"])) == (
            row["first"],
            row["second"],
        )
        assert t["first"]["dominant"] == row["dominant"]
        assert minutes(by[row["dominant"]]["first_s"]) == row["dominant_min"]
        assert prefetch["name"] == "weight_prefetch"
        assert prefetch["other"] == "on"
        assert (minutes(prefetch["first"]["known_s"]), minutes(prefetch["second"]["known_s"])) == (
            row["pf_first"],
            row["pf_second"],
        )


def _startup_event(host: str, process: str, load: float, scheduler: float, ready: float) -> dict[str, Any]:
    from flashfleet.bringup.startup_timings import TASK

    summary = (
        f"Engine startup timings (s): load_weight={load:.2f}, kv_cache_allocation=0.50, "
        f"scheduler_e2e={scheduler:.2f}, cuda_graph={{prefill=0.00, decode=30.00, target_verify=5.00, "
        f"draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}}, tokenizer_e2e={scheduler + 3:.2f}"
    )
    lines = [
        f"2026-12-04T18:40:00.000000+0000 {host} docker[1]: {summary}",
        f"2026-12-04T18:40:{ready:09.6f}+0000 {host} docker[1]: The server is fired up and ready to roll!",
    ]
    cmd = ["journalctl", f"_SYSTEMD_UNIT=flashfleet-{process}.service", "_SYSTEMD_INVOCATION_ID=1"]
    return {
        "event": "runner_on_ok",
        "event_data": {
            "host": host,
            "task": f"{TASK}: {process}",
            "res": {"cmd": cmd, "stdout_lines": lines},
        },
    }


def test_a_recorded_run_replaces_the_models_load_capture_and_readiness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    older, newer, empty = (
        runs / "mi355x-lowlat" / name for name in ("20261203-1", "20261204-1", "20261205-1")
    )
    for run, events in (
        (older, [_startup_event("node-0", "server", 999.0, 1100.0, 9.0)]),
        (newer, [_startup_event("node-0", "server", 700.0, 800.0, 12.5),
                 _startup_event("node-1", "server", 640.0, 760.0, 20.0)]),
        (empty, [{"event": "runner_on_ok", "event_data": {"host": "node-0", "task": "Phase | other"}}]),
    ):  # fmt: skip
        run.mkdir(parents=True)
        (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["plan", "mi355x-lowlat", "--format", "json", "--runs-dir", str(runs)]) == 0
    t = json.loads(capsys.readouterr().out)["time_to_first_token"]
    # the newest run with timings (the empty one after it has none), each figure the slowest server's
    assert t["measured"] == {
        "run": "20261204-1", "servers": 2, "load_s": 700.0, "jit_s": 84.5, "capture_s": 35.0, "ready_s": 20.0,
    }  # fmt: skip
    by = {p["name"]: p for p in t["phases"]}
    for name, value in (("load", 700.0), ("capture", 35.0), ("ready", 20.0)):
        assert (by[name]["first_s"], by[name]["second_s"], by[name]["basis"]) == (value, value, "measured")
        assert "run 20261204-1" in by[name]["source"]
    # the JIT stays modeled (unknown on AMD): a run does not say whether its kernel cache was cold
    assert by["jit"]["first_s"] is None
    assert "measured 84.5 s in run 20261204-1" in by["jit"]["source"]
    assert t["first"]["unknown"] == ["jit"]
    # a lever flipped away from the run's own settings is modeled: prefetch's load is the model's
    prefetch = t["levers"][0]
    assert prefetch["first"]["known_s"] < t["first"]["known_s"]
    assert main(["plan", "mi355x-lowlat", "--runs-dir", str(runs)]) == 0
    assert (
        "time to first token modeled, with run 20261204-1's own figures (existing)" in capsys.readouterr().out
    )
    # no run recorded: the model alone
    assert main(["plan", "mi355x-lowlat", "--format", "json", "--runs-dir", str(tmp_path / "none")]) == 0
    assert json.loads(capsys.readouterr().out)["time_to_first_token"]["measured"] is None


@pytest.mark.parametrize(("access", "on_volume"), [("ReadWriteMany", False), ("ReadWriteOnce", True)])
def test_a_pvc_every_pod_shares_keeps_the_compile_caches_in_the_containers(
    write_stack, access: str, on_volume: bool
) -> None:
    from flashfleet.planning.stack_recipe import kubernetes_plan

    def change(doc: Doc) -> None:
        src = doc["config"]["flashfleet:stack"]["nodes"]["source"]
        src["modelCache"] = {
            "kind": "pvc",
            "storageClass": "fast-rwx",
            "size": "1500Gi",
            "accessMode": access,
        }

    plan = load_stack("broken", write_stack("mi355x-k8s", change))
    assert plan.spec.caches.jit  # the default: asked for, and kept off only where it is unsafe
    assert plan.launch_settings().jit_cache is on_volume
    servers = [
        c
        for obj in kubernetes_plan(plan.stack, plan.spec).objects
        for c in (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers", [])
        if c["name"] == "server"
    ]
    assert servers
    for server in servers:
        names = {e["name"] for e in server.get("env", [])}
        assert ("TVM_FFI_CACHE_DIR" in names) is on_volume
    jit = next(p for p in time_to_first_token(plan, critical_path(plan)).phases if p.name == "jit")
    assert ("ReadWriteMany PVC every server pod shares" in jit.second_source) is not on_volume
