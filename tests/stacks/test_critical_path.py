"""`flashfleet plan`'s modeled bring-up: phases from catalog sizes and stated bandwidths, on the
schedule the playbooks follow (read from prepare.yml here, so the model cannot drift from it);
unknown sizes stay unknown; overrides and pre-staged weights."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bringup.contract import check_inventory
from flashfleet.catalog import CHECKPOINTS, DFLASH2_DRAFT, bringup_catalog
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import critical_path as critical_path_module
from flashfleet.planning import load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack import StackError, list_stacks

Doc = dict[str, Any]
PREPARE = Path(__file__).resolve().parents[2] / "playbooks/prepare.yml"


def spec_of(doc: Doc) -> dict[str, Any]:
    return doc["config"]["flashfleet:stack"]


def phases(cp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in cp["phases"]}


def test_every_checkpoint_of_the_catalog_has_a_size_with_its_basis_or_says_unknown() -> None:
    cat = bringup_catalog()
    entries = [cat["checkpoint"][r] for repos in CHECKPOINTS.values() for r in repos]
    entries += [cat["checkpoint"][DFLASH2_DRAFT], *cat["image"].values()]
    for entry in entries:
        assert entry["source"], entry
        if "size_gb" in entry:
            assert entry["basis"] in {"published", "estimate"}, entry
            # an estimate says it is one, and from what
            assert (entry["basis"] == "estimate") == entry["source"].startswith("estimate:"), entry
        else:
            assert entry["source"].startswith("unknown"), entry
    fp8 = cat["checkpoint"]["zai-org/GLM-5.3-Flash"]
    assert (fp8["size_gb"], fp8["basis"]) == (328, "published")


def _plays_with(role: str, entry: str = "main") -> list[int]:
    """Indexes of the prepare.yml plays that run `role` (its `entry` point)."""
    found = []
    for i, play in enumerate(yaml.safe_load(PREPARE.read_text())):
        roles = [r["role"] if isinstance(r, dict) else r for r in play.get("roles", [])]
        imports = [
            (
                t["ansible.builtin.import_role"]["name"],
                t["ansible.builtin.import_role"].get("tasks_from", "main"),
            )
            for t in play.get("tasks", [])
            if "ansible.builtin.import_role" in t
        ]
        if (entry == "main" and role in roles) or (role, entry) in imports:
            found.append(i)
    return found


def test_prepare_starts_the_download_before_the_driver_and_waits_after_the_image() -> None:
    # bringup.toml's host lanes mirror this: if the playbook stops starting the download before
    # the driver play, or waits for it earlier, the model is wrong and this fails.
    [start] = _plays_with("model_weights", "start")
    [wait] = _plays_with("model_weights", "wait")
    drivers = _plays_with("nvidia_driver") + _plays_with("rocm_driver")
    [image] = _plays_with("sglang_image")
    assert drivers
    assert start < min(drivers)
    [preflight] = _plays_with("preflight")
    assert start > preflight
    assert wait >= max([*drivers, image])
    assert _plays_with("model_weights") == []
    [runtime] = _plays_with("container_runtime")
    assert runtime < image  # one role a play: the runtime, then the image, in the driver's lane
    lanes = bringup_catalog()["schedule"]["host"]["lanes"]
    assert sorted(lanes) == [["driver", "image"], ["weights"]]


def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec", {})
    if obj["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return [spec["template"]["spec"]] if "template" in spec else []


def _download_and_pull(objects: tuple[dict[str, Any], ...], serving: set[str]) -> tuple[list, list]:
    """(images of the containers that download weights, pre-pull pods that run a serving image)."""
    downloads, pre_pulls = [], []
    for obj in objects:
        for pod in _pods(obj):
            every = [*pod.get("initContainers", []), *pod["containers"]]
            downloads += [c["image"] for c in every if c["name"].startswith("weights-")]
            if obj["kind"] == "DaemonSet" and {c["image"] for c in pod.get("initContainers", [])} & serving:
                pre_pulls.append(pod)
    return downloads, pre_pulls


@pytest.mark.parametrize("cache", ["hostPath", "ReadWriteMany"])
def test_the_kubernetes_download_and_the_image_pull_run_side_by_side(write_stack, cache: str) -> None:
    # bringup.toml's kubernetes lanes mirror the rendered manifests: the downloads run on an
    # image of their own (no serving-image pull before them) and a DaemonSet on the serving
    # nodes pulls the serving image meanwhile. Should a download run the serving image again,
    # or the pre-pull go, the model is wrong and this fails.
    def rwx(doc: Doc) -> None:
        spec_of(doc)["nodes"]["source"]["modelCache"] = {"kind": "pvc", "storageClass": "fsx", "size": "2Ti"}

    b = (
        load_stack("mi355x-k8s")
        if cache == "hostPath"
        else load_stack("broken", write_stack("mi355x-k8s", rwx))
    )
    plan = kubernetes_plan(b.stack, b.spec)
    serving = {launch.image for launch in plan.launches}
    downloads, pre_pulls = _download_and_pull(plan.objects, serving)
    assert downloads
    assert not set(downloads) & serving
    (pod,) = pre_pulls
    servers = [p for o in plan.objects if o["metadata"]["name"] in plan.workloads for p in _pods(o)]
    assert servers
    for server in servers:
        assert (pod.get("nodeSelector"), pod.get("tolerations")) == (
            server.get("nodeSelector"),
            server.get("tolerations"),
        )
    assert bringup_catalog()["schedule"]["kubernetes"]["lanes"] == [["weights"], ["image"]]


@pytest.mark.parametrize("stack", list_stacks())
def test_plan_json_carries_the_critical_path_of_every_catalog_stack(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", stack, "--format", "json"]) == 0
    cp = json.loads(capsys.readouterr().out)["critical_path"]
    names = [p["name"] for p in cp["phases"]]
    kube = cp["node_source"] == "kubernetes"
    assert names == (["weights", "image"] if kube else ["weights", "driver", "image"])
    for p in cp["phases"]:
        assert p["source"], p
        assert (p["basis"] is None) == (p["size_gb"] is None), p
        assert p["basis"] in {None, "published", "estimate"}, p
    # every catalog stack has a figure now: no size of its artifacts is unknown
    assert cp["unknown"] == []
    # Lanes side by side, phases of a lane one after another: the total is where the last
    # phase ends; the ratio divides by the longest single transfer.
    by_name = phases(cp)
    for lane in cp["lanes"]:
        assert by_name[lane[0]]["start_s"] == 0
        for before, after in itertools.pairwise(lane):
            assert by_name[after]["start_s"] == pytest.approx(by_name[before]["end_s"])
    assert cp["total_s"] == pytest.approx(max(p["end_s"] for p in cp["phases"]))
    transfers = [p for p in cp["phases"] if p["size_gb"]]
    largest = max(transfers, key=lambda p: p["seconds"])
    assert cp["largest_transfer"] == largest["name"]
    assert cp["ratio_to_largest_transfer"] == pytest.approx(cp["total_s"] / largest["seconds"], abs=0.01)
    for p in transfers:
        assert p["seconds"] == pytest.approx(p["size_gb"] * 8 / p["gbps"], abs=0.1)
    # issue 17: the download overlaps the image pull (on hosts after the driver install; on
    # Kubernetes beside the pre-pull DaemonSet)
    assert cp["ratio_to_largest_transfer"] <= 1.1
    assert "image" in by_name["weights"]["overlaps"]


def test_the_h200_fp8_stack_models_the_checkpoint_from_its_recorded_size() -> None:
    cp = critical_path(load_stack("h200-lowlat")).model_dump()
    w = phases(cp)["weights"]
    assert (w["size_gb"], w["gbps"], w["seconds"], w["basis"]) == (328, 10.0, 262.4, "published")
    assert "306 GiB (328.6 GB)" in w["source"]
    # prepare.yml starts the download before the driver play: weights and the image pull
    # run at the same time, the image after the driver
    assert phases(cp)["weights"]["start_s"] == 0
    assert phases(cp)["image"]["start_s"] == phases(cp)["driver"]["end_s"]
    assert phases(cp)["weights"]["overlaps"] == ["image"]
    assert cp["total_s"] == 262.4
    assert cp["ratio_to_largest_transfer"] == 1.0


def test_a_site_whose_image_chain_is_the_longer_lane_ends_with_it(write_stack) -> None:
    # a fast Hub, a slow registry and a driver install: the driver -> image lane is the longer
    def change(doc: Doc) -> None:
        spec_of(doc)["bringup"] = {"bandwidth": {"weightsGbps": 100, "imageGbps": 1}, "driverInstallS": 600}

    cp = critical_path(load_stack("broken", write_stack("h200-lowlat", change))).model_dump()
    assert phases(cp)["image"]["start_s"] == 600
    assert cp["total_s"] == pytest.approx(600 + 88)  # 11 GB at 1 Gbit/s
    assert cp["largest_transfer"] == "image"
    assert cp["ratio_to_largest_transfer"] == pytest.approx(688 / 88, abs=0.01)


def test_estimated_sizes_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    cp = critical_path(load_stack("mi355x-agentx")).model_dump()  # MXFP4 checkpoint, ROCm image
    assert (phases(cp)["weights"]["size_gb"], phases(cp)["weights"]["basis"]) == (190, "estimate")
    assert (phases(cp)["image"]["size_gb"], phases(cp)["image"]["basis"]) == (75, "estimate")
    assert main(["plan", "mi355x-agentx"]) == 0
    out = capsys.readouterr().out
    assert "weights  190 GB (estimate) at 1 Gbit/s" in out
    assert "image    75 GB (estimate) at 1 Gbit/s" in out


def test_unknown_sizes_stay_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = copy.deepcopy(bringup_catalog())
    for key in ("size_gb", "basis"):
        del cat["checkpoint"]["OneNexus/GLM-5.3-Flash-MXFP4"][key]
        del cat["image"]["amd"][key]
    monkeypatch.setattr(critical_path_module, "bringup_catalog", lambda: cat)
    cp = critical_path(load_stack("mi355x-agentx")).model_dump()
    assert set(cp["unknown"]) == {"image", "weights"}
    assert cp["total_s"] is None
    assert cp["ratio_to_largest_transfer"] is None
    assert all(
        p["seconds"] is None and p["basis"] is None for p in cp["phases"] if p["name"] in cp["unknown"]
    )


def test_a_size_without_a_known_basis_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = copy.deepcopy(bringup_catalog())
    cat["image"]["amd"]["basis"] = "guess"
    monkeypatch.setattr(critical_path_module, "bringup_catalog", lambda: cat)
    with pytest.raises(ValueError, match=r"image\.amd\.basis"):
        critical_path(load_stack("mi355x-agentx"))


def test_bandwidths_and_driver_time_come_from_the_stack_when_it_states_them(write_stack) -> None:
    def change(doc: Doc) -> None:
        spec_of(doc)["bringup"] = {"bandwidth": {"weightsGbps": 100, "imageGbps": 10}, "driverInstallS": 90}

    cp = critical_path(load_stack("broken", write_stack("h200-lowlat", change))).model_dump()
    p = phases(cp)
    assert (p["weights"]["seconds"], p["image"]["seconds"], p["driver"]["seconds"]) == (26.2, 8.8, 90.0)
    assert cp["total_s"] == pytest.approx(90 + 8.8)  # the driver -> image lane is the longer here
    assert cp["largest_transfer"] == "weights"


@pytest.mark.parametrize(
    ("bringup", "path"),
    [
        ({"bandwidth": {"weightsGbps": 0}}, "flashfleet:stack.bringup.bandwidth.weightsGbps"),
        ({"bandwidth": {"imageGbps": -1}}, "flashfleet:stack.bringup.bandwidth.imageGbps"),
        ({"bandwith": {}}, "flashfleet:stack.bringup.bandwith"),
        ({"driverInstallS": -5}, "flashfleet:stack.bringup.driverInstallS"),
    ],
)
def test_bad_bringup_fields_are_refused_at_their_path(write_stack, bringup: dict, path: str) -> None:
    with pytest.raises(StackError) as err:
        load_stack("broken", write_stack("h200-lowlat", lambda d: spec_of(d).update(bringup=bringup)))
    assert err.value.paths() == [path]


def test_prestaged_weights_leave_the_critical_path_and_the_download(write_stack) -> None:
    stacks = write_stack("h200-lowlat", lambda d: spec_of(d).update(weights={"prestaged": True}))
    b = load_stack("broken", stacks)
    cp = critical_path(b).model_dump()
    assert phases(cp)["weights"]["seconds"] == 0
    assert cp["largest_transfer"] == "image"
    assert cp["total_s"] == pytest.approx(phases(cp)["image"]["seconds"])
    assert cp["weights_prestaged"] is True
    inventory = build_inventory(b, ["198.51.100.1"], ["10.0.0.1"])
    check_inventory(inventory, "broken")
    assert {h["flashfleet_weights_prestaged"] for h in inventory["all"]["hosts"].values()} == {True}


def test_without_prestaged_weights_the_fact_is_false() -> None:
    b = load_stack("h200-lowlat")
    inventory = build_inventory(b, ["198.51.100.1"], ["10.0.0.1"])
    assert {h["flashfleet_weights_prestaged"] for h in inventory["all"]["hosts"].values()} == {False}


def test_plan_text_shows_one_line_per_phase_and_the_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "h200-lowlat"]) == 0
    out = capsys.readouterr().out
    assert (
        "transfers modeled (aws, every node at once): done after 4.4 min, part of the time to first "
        "token below; ratio to the largest transfer "
        "(weights) 1.0; lanes side by side: weights, driver -> image"
    ) in out
    lines = [line.split() for line in out.splitlines() if line.startswith("    ") and " min" in line]
    assert [line[0] for line in lines[:3]] == ["weights", "driver", "image"]
    weights, _, image = (" ".join(line) for line in lines[:3])
    assert weights.startswith("weights 328 GB (published) at 10 Gbit/s, 4.4 min from min 0.0, overlaps image")
    assert image.startswith("image 11 GB (estimate) at 5 Gbit/s, 0.3 min from min 0.0, overlaps weights")
