"""What a lock's image entry changes, with the lock written as `flashfleet lock` writes it (the
registry side runs against a real registry in tests/cli/test_lock_cli.py): every consumer of
the stack's image takes the locked digest (the inventory's base for the sglang_image role, the
docker launch of a stack that runs the base as it is, a Kubernetes pod), `plan` shows it, and a
stack whose own image.digest disagrees with its lock is refused. With the same lock: one that
misses a repository the recipe downloads is not current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.catalog import hardware_catalog
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.planning.apt_packages import node_apt
from flashfleet.planning.image_apt import image_apt_want
from flashfleet.planning.node_images import node_images
from flashfleet.planning.packages import pip_installs
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.lock import (
    LockedAmi,
    LockedDeb,
    LockedFile,
    LockedImage,
    LockedImageApt,
    LockedPackage,
    LockedPackageFile,
    LockedRepo,
    StackLock,
    dump_lock,
    read_lock,
)

MODEL = "zai-org/GLM-5.3-Flash"
LOCKED = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def _stack(folder: Path, name: str, image: dict[str, Any] | None = None) -> None:
    path = folder / f"Pulumi.{name}.yaml"
    shutil.copy(DEFAULT_STACKS_DIR / path.name, path)
    if image is not None:
        doc = yaml.safe_load(path.read_text())
        spec = doc["config"]["flashfleet:stack"]
        spec["image"] = {**spec.get("image", {}), **image}
        path.write_text(yaml.safe_dump(doc))


def _lock(folder: Path, name: str, tagged: str) -> None:
    repo = LockedRepo(
        revision="main", commit="c" * 40, files={"config.json": LockedFile(size=2, git_oid="d" * 40)}
    )
    image = LockedImage(digest=LOCKED, platforms={"linux/amd64": LOCKED})
    # the packages (pip and the vendors' apt) pinned too: here only the image is under test
    packages = {}
    for pkg, want in pip_installs(load_stack(name, folder).spec).items():
        version = want.specifier.lstrip("=<>!~")
        wheel = f"{pkg}-{version}-py3-none-any.whl"
        packages[pkg] = LockedPackage(version=version, files={wheel: LockedPackageFile(sha256="e" * 64)})
    spec = load_stack(name, folder).spec
    apt: dict[str, dict[str, LockedDeb]] = {}
    for want in node_apt(spec):
        globs = want.globs()
        for index in want.indexes:
            apt.setdefault(index.url, {})
        for pkg in dict.fromkeys([*want.install, *globs]):
            version = globs.get(pkg, "1").replace("*", "1")
            apt[want.indexes[0].url][pkg] = LockedDeb(version=version, sha256="f" * 64, size=1)
    # and the derived image's FFmpeg, in a snapshot of the archive of the base's distribution
    hw = hardware_catalog()[spec.hardware]
    want = image_apt_want(hw, {}, "ubuntu noble")
    image_apt = LockedImageApt(
        distribution=want.distribution, arch=want.arch, snapshot=want.snapshot("20261204T000000Z"),
        components=list(want.components), suites=dict.fromkeys(want.suites, "a" * 64),
        packages={p: LockedDeb(version="1", sha256="b" * 64, size=1) for p in want.install},
    )  # fmt: skip
    # and the AMIs the stack's SSM parameters named in its region
    region = load_stack(name, folder).region
    images = node_images(spec, hw.arch, region, None, None)
    amis = {image.parameter: LockedAmi(region=str(region), ami="ami-0abc1234") for image in images}
    lock = StackLock(
        stack=name, locked_on="2026-12-04", weights={MODEL: repo}, images={tagged: image}, packages=packages,
        apt=apt, image_apt={spec.image.tagged_ref(hw): image_apt}, amis=amis,
    )  # fmt: skip
    (folder / f"{name}.lock.yaml").write_text(dump_lock(lock))


def _plan(folder: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", name, "--stacks-dir", str(folder), "--format", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_inventory_and_plan_take_the_locked_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack(tmp_path, "h200-lowlat")
    _lock(tmp_path, "h200-lowlat", "lmsysorg/sglang:v0.5.23")
    plan = load_stack("h200-lowlat", tmp_path)
    [hostvars] = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])["all"]["hosts"].values()
    assert hostvars["flashfleet_image"] == f"lmsysorg/sglang:v0.5.23@{LOCKED}"
    view = _plan(tmp_path, "h200-lowlat", capsys)
    [image] = [p for p in view["lock"]["parts"] if p["kind"] == "image"]
    assert image == {
        "kind": "image", "name": "lmsysorg/sglang:v0.5.23", "state": "locked", "pinned": LOCKED,
        "detail": "the tag's digest as of 2026-12-04, pulled and run by it (linux/amd64)",
    }  # fmt: skip
    assert not [w for w in view["warnings"] if w.startswith("not repeatable")]
    # the derived image keeps its name: it is built on the node from the locked base
    assert view["nodes"][0]["processes"][0]["image"].startswith("flashfleet/sglang:v0.5.23-tf")


def test_a_lock_for_another_tag_leaves_the_image_floating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack(tmp_path, "h200-lowlat")
    _lock(tmp_path, "h200-lowlat", "lmsysorg/sglang:v0.5.22")  # the stack moved on to v0.5.23
    view = _plan(tmp_path, "h200-lowlat", capsys)
    assert {p["kind"]: p["state"] for p in view["lock"]["parts"]}["image"] == "floating"
    [warning] = [w for w in view["warnings"] if w.startswith("not repeatable")]
    assert warning == (
        "not repeatable: h200-lowlat.lock.yaml does not pin the image's tag (the stack changed since "
        "it was written); run `flashfleet lock h200-lowlat --update`"
    )
    plan = load_stack("h200-lowlat", tmp_path)
    [hostvars] = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])["all"]["hosts"].values()
    assert hostvars["flashfleet_image"] == "lmsysorg/sglang:v0.5.23"


def test_a_kubernetes_pod_pulls_the_locked_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _stack(tmp_path, "mi355x-k8s")

    def server_images() -> set[str]:
        plan = load_stack("mi355x-k8s", tmp_path)
        k8s = kubernetes_plan(plan.stack, plan.spec, plan.lock)
        return {
            c["image"]
            for o in k8s.objects
            if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"]
        }

    [tagged] = server_images()
    assert "@" not in tagged
    _lock(tmp_path, "mi355x-k8s", tagged)
    assert server_images() == {f"{tagged}@{LOCKED}"}
    view = _plan(tmp_path, "mi355x-k8s", capsys)
    assert {p["kind"]: p["state"] for p in view["lock"]["parts"]}["image"] == "locked"


def test_a_stack_digest_that_disagrees_with_the_lock_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack(tmp_path, "h200-lowlat", image={"digest": OTHER})
    _lock(tmp_path, "h200-lowlat", "lmsysorg/sglang:v0.5.23")
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"flashfleet plan: stack h200-lowlat: flashfleet:stack.image.digest: {OTHER} is not the {LOCKED} "
        "that h200-lowlat.lock.yaml pins for lmsysorg/sglang:v0.5.23: drop one, or run "
        "`flashfleet lock h200-lowlat --update` [rule: lock-image]"
    ]
    # the same digest in both: accepted, locked
    _stack(tmp_path, "h200-lowlat", image={"digest": LOCKED})
    view = _plan(tmp_path, "h200-lowlat", capsys)
    assert {p["kind"]: p["pinned"] for p in view["lock"]["parts"]}["image"] == LOCKED


def _stale(folder: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [w for w in _plan(folder, "h200-lowlat", capsys)["warnings"] if w.startswith("not repeatable")]


def test_a_lock_that_misses_a_downloaded_repository_is_not_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other part pinned, the model the recipe downloads not: a warning, and a refusal
    where the stack says `lock: required`."""
    _stack(tmp_path, "h200-lowlat")
    _lock(tmp_path, "h200-lowlat", "lmsysorg/sglang:v0.5.23")
    lock_file = tmp_path / "h200-lowlat.lock.yaml"
    whole = read_lock(lock_file)
    assert whole is not None
    assert set(whole.weights) == {MODEL}
    assert _stale(tmp_path, capsys) == []

    # the lock names another repository (a recipe's draft model, since dropped), not the model
    other = {"zai-org/GLM-5.3-Flash-Draft": whole.weights[MODEL]}
    lock_file.write_text(dump_lock(whole.model_copy(update={"weights": other})))
    assert _stale(tmp_path, capsys) == [
        f"not repeatable: h200-lowlat.lock.yaml does not pin {MODEL} (the stack changed since it was "
        "written); run `flashfleet lock h200-lowlat --update`"
    ]
    path = tmp_path / "Pulumi.h200-lowlat.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"]["lock"] = "required"
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", "h200-lowlat", "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(
        f"flashfleet:stack.lock: required, but h200-lowlat.lock.yaml does not pin {MODEL} (the stack "
        "changed since it was written): run `flashfleet lock h200-lowlat --update` [rule: lock-required]"
    ), err
    assert len(err.strip().splitlines()) == 1, err
