"""`flashfleet plan`'s modeled bring-up: phases from catalog sizes and stated bandwidths, on the
schedule the playbooks follow; unknown sizes stay unknown; overrides and pre-staged weights."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flashfleet.bringup.contract import check_inventory
from flashfleet.catalog import CHECKPOINTS, DFLASH2_DRAFT, bringup_catalog
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.stack import StackError, list_stacks

Doc = dict[str, Any]


def spec_of(doc: Doc) -> dict[str, Any]:
    return doc["config"]["flashfleet:stack"]


def phases(cp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in cp["phases"]}


def test_every_checkpoint_of_the_catalog_has_a_size_or_says_unknown_with_a_source() -> None:
    sizes = bringup_catalog()["checkpoint"]
    for repo in [r for repos in CHECKPOINTS.values() for r in repos] + [DFLASH2_DRAFT]:
        assert sizes[repo]["source"], repo
        assert "size_gb" in sizes[repo] or sizes[repo]["source"].startswith("unknown"), repo
    assert sizes["zai-org/GLM-5.3-Flash"]["size_gb"] == 328


@pytest.mark.parametrize("stack", list_stacks())
def test_plan_json_carries_the_critical_path_of_every_catalog_stack(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", stack, "--format", "json"]) == 0
    cp = json.loads(capsys.readouterr().out)["critical_path"]
    names = [p["name"] for p in cp["phases"]]
    kube = cp["node_source"] == "kubernetes"
    assert names == (["weights", "image"] if kube else ["driver", "image", "weights"])
    for p in cp["phases"]:
        assert p["source"], p
    if cp["unknown"]:
        assert cp["total_s"] is None
        assert cp["ratio_to_largest_transfer"] is None
        assert all(phases(cp)[n]["seconds"] is None for n in cp["unknown"])
        return
    # Stages one after another: the total is where the last phase ends; the ratio divides by
    # the longest single transfer.
    assert cp["total_s"] == pytest.approx(max(p["end_s"] for p in cp["phases"]))
    transfers = [p for p in cp["phases"] if p["size_gb"]]
    largest = max(transfers, key=lambda p: p["seconds"])
    assert cp["largest_transfer"] == largest["name"]
    assert cp["ratio_to_largest_transfer"] == pytest.approx(cp["total_s"] / largest["seconds"], abs=0.01)
    for p in transfers:
        assert p["seconds"] == pytest.approx(p["size_gb"] * 8 / p["gbps"], abs=0.1)


def test_the_h200_fp8_stack_models_the_checkpoint_from_its_recorded_size() -> None:
    cp = critical_path(load_stack("h200-lowlat"))
    w = phases(cp)["weights"]
    assert (w["size_gb"], w["gbps"], w["seconds"]) == (328, 10.0, 262.4)
    assert "328 GB" in w["source"]
    # prepare.yml runs one role after another: nothing overlaps today, and the weights wait
    # for the image pull
    assert phases(cp)["weights"]["start_s"] == phases(cp)["image"]["end_s"]
    assert all(not p["overlaps"] for p in cp["phases"])


def test_unknown_checkpoint_sizes_stay_unknown() -> None:
    cp = critical_path(load_stack("mi355x-agentx"))  # MXFP4 checkpoint, ROCm image
    assert set(cp["unknown"]) == {"image", "weights"}
    assert cp["ratio_to_largest_transfer"] is None


def test_bandwidths_and_driver_time_come_from_the_stack_when_it_states_them(write_stack) -> None:
    def change(doc: Doc) -> None:
        spec_of(doc)["bringup"] = {"bandwidth": {"weightsGbps": 100, "imageGbps": 10}, "driverInstallS": 90}

    cp = critical_path(load_stack("broken", write_stack("h200-lowlat", change)))
    p = phases(cp)
    assert (p["weights"]["seconds"], p["image"]["seconds"], p["driver"]["seconds"]) == (26.2, 24.0, 90.0)
    assert cp["total_s"] == pytest.approx(140.2)
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
    cp = critical_path(b)
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


def test_plan_text_shows_one_line_per_phase(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "h200-lowlat"]) == 0
    out = capsys.readouterr().out
    assert "bring-up modeled (aws, every node at once): total 5.2 min" in out
    lines = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and " min" in line]
    assert lines[:3] == ["driver", "image", "weights"]
