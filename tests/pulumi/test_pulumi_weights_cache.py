"""caches.weightsSnapshot under Pulumi mocks: the plan that decides it, the weights volume in the
GPU nodes' launch template (restored from the newest snapshot of the key, or empty), and the
resource that keeps the cache once the bring-up has run. What it does in EC2 is in
tests/sweep/test_weights_cache_ec2.py (moto)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi_harness import Result, run_program

from flashfleet.catalog import bringup_catalog
from flashfleet.components.tags import CACHE_TAG, EXPIRES_TAG, MANAGED_BY_TAG, STACK_TAG
from flashfleet.components.weights_cache import CACHE_KEY_TAG, CHECKPOINT_TAG, REVISION_TAG
from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan, load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.plan_model import TimeToFirstToken
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.planning.weights_snapshot import GIB, HEADROOM_GIB, cache_key
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.errors import StackError
from flashfleet.stack.lock import LockedFile, LockedRepo, StackLock, dump_lock

LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
KEEP = "pulumi-python:dynamic/flashfleet:WeightsSnapshot"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHARD = 5 * GIB + 7
SHARDS = 60  # 300 GiB: the volume is 1.1 x that, plus the headroom


def _stack(folder: Path, name: str, cache: Any, *, locked: bool = True, edit: Any = None) -> None:
    path = folder / f"Pulumi.{name}.yaml"
    shutil.copy(DEFAULT_STACKS_DIR / path.name, path)
    doc = yaml.safe_load(path.read_text())
    spec = doc["config"]["flashfleet:stack"]
    spec.setdefault("caches", {})["weightsSnapshot"] = cache
    if edit:
        edit(spec)
    path.write_text(yaml.safe_dump(doc))
    if locked:
        model = load_stack(name).recipe.model  # what the catalog stack downloads
        files = {
            f"model-{i:05d}.safetensors": LockedFile(size=SHARD, sha256=f"{i:064x}") for i in range(SHARDS)
        }
        repo = LockedRepo(revision="main", commit=COMMIT, files=files)
        lock = StackLock(stack=name, locked_on="2026-12-06", weights={model: repo})
        (folder / f"{name}.lock.yaml").write_text(dump_lock(lock))


@pytest.fixture
def h200(tmp_path: Path) -> StackPlan:
    _stack(tmp_path, "h200-lowlat", {"keepDays": 3, "initializationRateMibs": 300})
    return load_stack("h200-lowlat", tmp_path)


def test_the_plan_keys_the_cache_by_every_locked_commit(h200: StackPlan) -> None:
    cache = h200.weights_snapshot
    assert cache is not None
    assert cache.commits == {h200.recipe.model: COMMIT}
    assert cache.key == cache_key({h200.recipe.model: COMMIT})
    assert len(cache.key) == 16
    assert cache_key({h200.recipe.model: "f" * 40}) != cache.key  # another commit, another cache
    assert cache.checkpoint_bytes == SHARDS * SHARD
    assert cache.volume_gib == -(-SHARDS * SHARD * 11 // (10 * GIB)) + HEADROOM_GIB
    assert (cache.keep_days, cache.initialization_rate_mibs) == (3, 300)


@pytest.mark.parametrize(
    ("name", "cache", "locked", "edit", "rule"),
    [
        ("h200-lowlat", {}, False, None, "locked-weights"),
        ("h200-lowlat", {}, True, lambda s: s.__setitem__("weights", {"prestaged": True}), "prestaged"),
        ("mi355x-lowlat", {}, False, None, "aws-only"),
    ],
)
def test_a_cache_that_cannot_be_keyed_or_kept_is_refused(
    tmp_path: Path, name: str, cache: Any, locked: bool, edit: Any, rule: str
) -> None:
    _stack(tmp_path, name, cache, locked=locked, edit=edit)
    with pytest.raises(StackError) as err:
        load_stack(name, tmp_path)
    [problem] = [p for p in err.value.problems if p.path.endswith("caches.weightsSnapshot")]
    assert problem.rule == rule


@pytest.mark.parametrize(
    "value", [{"keepDays": 0}, {"keepDays": 91}, {"initializationRateMibs": 99}, {"x": 1}]
)
def test_out_of_range_settings_are_refused(tmp_path: Path, value: dict[str, int]) -> None:
    _stack(tmp_path, "h200-lowlat", value)
    with pytest.raises(StackError) as err:
        load_stack("h200-lowlat", tmp_path)
    assert any("weightsSnapshot" in p.path for p in err.value.problems)


def _volume(r: Result) -> dict[str, Any]:
    [lt] = r.mocks.of_type(LT)
    [volume] = [m for m in lt.inputs["blockDeviceMappings"] if m["deviceName"] == "/dev/sdf"]
    return dict(volume["ebs"])


def test_no_snapshot_yet_an_empty_encrypted_volume_and_a_snapshot_after_the_bringup(h200: StackPlan) -> None:
    r = run_program("h200-lowlat", plan=h200)
    cache = h200.weights_snapshot
    assert cache is not None
    volume = _volume(r)
    assert volume == {
        "volumeSize": cache.volume_gib, "volumeType": "gp3", "iops": 16000, "throughput": 1000,
        "encrypted": "true", "deleteOnTermination": "true",
    }  # fmt: skip
    [(_token, asked)] = [(t, a) for t, a in r.mocks.calls if t.startswith("aws:ebs/")]
    assert asked["owners"] == ["self"]
    assert {f["name"]: f["values"] for f in asked["filters"]} == {
        f"tag:{CACHE_KEY_TAG}": [cache.key], f"tag:{MANAGED_BY_TAG}": ["flashfleet"], "status": ["completed"],
    }  # fmt: skip
    [keep] = r.mocks.of_type(KEEP)
    first_gpu = r.mocks.of_type(INSTANCE)[0]
    assert keep.inputs["instanceId"] == f"{first_gpu.name}-id"
    assert keep.inputs["device"] == "/dev/sdf"
    assert keep.inputs["keepDays"] == 3
    assert keep.inputs["region"] == h200.region
    assert keep.inputs["tags"] == {
        "Name": f"h200-lowlat-weights-{cache.key}", MANAGED_BY_TAG: "flashfleet", STACK_TAG: "h200-lowlat",
        CACHE_TAG: "weights", CACHE_KEY_TAG: cache.key, CHECKPOINT_TAG: h200.recipe.model, REVISION_TAG: COMMIT,
    }  # fmt: skip
    assert EXPIRES_TAG not in keep.inputs["tags"]  # set when it runs: keepDays from then
    # after the bring-up: its run directory is an input, so Pulumi orders it after the playbooks
    assert keep.inputs["bringup"] == r.outputs["bringupRunDir"]
    assert set(r.outputs["weightsSnapshot"]) == {"snapshotId", "made", "expiresAt"}


def test_a_completed_snapshot_of_the_key_is_restored_on_every_gpu_node(h200: StackPlan) -> None:
    r = run_program("h200-lowlat", plan=h200, snapshots=["snap-0newest000000000", "snap-0older0000000000"])
    volume = _volume(r)
    assert volume["snapshotId"] == "snap-0newest000000000"
    assert "encrypted" not in volume  # as its snapshot is; EC2 refuses both
    assert volume["volumeInitializationRate"] == 300
    # one launch template for every GPU node: each gets its own volume from the same snapshot
    assert {i.inputs["launchTemplate"]["id"] for i in r.mocks.of_type(INSTANCE)} == {
        "h200-lowlat-template-id"
    }


def test_a_stack_without_the_cache_has_no_volume_and_asks_ec2_nothing() -> None:
    r = run_program("h200-lowlat")
    [lt] = r.mocks.of_type(LT)
    assert [m["deviceName"] for m in lt.inputs["blockDeviceMappings"]] == ["/dev/sda1"]
    assert not [t for t, _ in r.mocks.calls if t.startswith("aws:ebs/")]
    assert not r.mocks.of_type(KEEP)
    assert "weightsSnapshot" not in r.outputs


def test_every_gpu_node_mounts_its_volume(tmp_path: Path) -> None:
    _stack(tmp_path, "h200-replicas", {})
    plan = load_stack("h200-replicas", tmp_path)
    n = len(plan.nodes)
    hosts = build_inventory(plan, [f"198.51.100.{i}" for i in range(n)], [f"10.0.0.{i}" for i in range(n)])
    volumes = {name: h["flashfleet_weights_volume"] for name, h in hosts["all"]["hosts"].items()}
    gpu = {node.name for node in plan.nodes if node.gpu_node}
    assert volumes == {name: name in gpu for name in volumes}
    assert any(volumes.values())


def _ttft(plan: StackPlan) -> TimeToFirstToken:
    return time_to_first_token(plan, critical_path(plan))


def test_plan_models_the_second_bringup_from_the_snapshot(h200: StackPlan) -> None:
    ttft = _ttft(h200)
    phases = {p.name: p for p in ttft.phases}
    assert phases["weights"].first_s
    assert phases["weights"].second_s == 0.0
    assert "restored from the EBS snapshot" in phases["weights"].second_source
    # the blocks come from S3 at the provisioned 300 MiB/s: slower than the load's own figure
    size_gb = sum(bringup_catalog()["checkpoint"][r]["size_gb"] for r in h200.recipe.repositories)
    fetch_s = round(size_gb * 1e9 / (300 * 2**20), 1)
    assert phases["load"].second_s == max(phases["load"].first_s or 0, fetch_s)
    assert "300 MiB/s" in phases["load"].second_source
    assert phases["jit"].second_s == bringup_catalog()["startup"]["jit"]["nvidia"]["cached_s"]
    [lever] = [lv for lv in ttft.levers if lv.name == "caches.weightsSnapshot"]
    assert (lever.setting, lever.other) == ("on", "off")
    # off: the second bring-up downloads again, like the first
    assert lever.second.known_s > ttft.second.known_s


def test_without_a_rate_the_restored_load_is_unknown_not_guessed(tmp_path: Path) -> None:
    _stack(tmp_path, "h200-lowlat", {})
    ttft = _ttft(load_stack("h200-lowlat", tmp_path))
    load = next(p for p in ttft.phases if p.name == "load")
    assert load.second_s is None
    assert load.second_source.startswith("unknown: lazy loading")
    assert "load" in ttft.second.unknown
    assert ttft.second.total_s is None


def test_an_aws_stack_without_it_shows_the_lever_off() -> None:
    ttft = _ttft(load_stack("h200-lowlat"))
    [lever] = [lv for lv in ttft.levers if lv.name == "caches.weightsSnapshot"]
    assert (lever.setting, lever.other) == ("off", "on (without an initialization rate)")
    assert next(p for p in ttft.phases if p.name == "weights").second_s != 0.0
    assert "load" in lever.second.unknown  # on without a rate: the lazy load has no public figure


def test_down_says_the_weights_snapshot_stays_and_who_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flashfleet.cli import main
    from flashfleet.cli.shared import stackops

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    _stack(stacks, "h200-lowlat", {"keepDays": 3})
    destroyed: list[str] = []
    monkeypatch.setattr(stackops, "project_dir", lambda: tmp_path)
    monkeypatch.setattr(stackops, "cli_available", lambda: True)
    monkeypatch.setattr(stackops, "resources", lambda stack: [f"aws:ec2/instance:Instance {stack}-node-0"])
    monkeypatch.setattr(stackops, "destroy", lambda stack, _say: destroyed.append(stack))
    assert main(["down", "h200-lowlat", "--yes"]) == 0
    out = capsys.readouterr().out
    key = load_stack("h200-lowlat", stacks).weights_snapshot.key  # type: ignore[union-attr]
    model = load_stack("h200-lowlat").recipe.model
    assert f"keeps the weights snapshot of {model}@{COMMIT[:12]} (flashfleet:cache-key {key})" in out
    assert "3 days after the last bring-up that used it" in out
    assert destroyed == ["h200-lowlat"]
