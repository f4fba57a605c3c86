"""`flashfleet lock` against the stand-in Hub (tests/hosts/hub.py, on loopback, the real
huggingface_hub client) and a real OCI registry (Debian's docker-registry, on loopback:
tests/hosts/registry.py), and what a lock changes downstream: `plan` shows the weights and the
image locked, the servers load the locked commit from the image's locked digest, the inventory
hands both to the nodes, `lock: required` refuses a stack without one, and a broken or stale lock
is refused, named.

The node side runs on test hosts: the locked commit downloaded after main moved and a tampered
shard caught in tests/roles/test_model_weights.py; the image pulled by its locked digest after
the tag moved in tests/engine/test_image_lock.py."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.aptindex import AptIndex, Deb, of_catalog
from hosts.aws_public import publish, publish_catalog
from hosts.hub import Hub, Repo, git_oid
from hosts.pypi import PackageIndex
from hosts.registry import Registry

from flashfleet.catalog import DFLASH2_DRAFT, node_packages
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR

MODEL = "zai-org/GLM-5.3-Flash"
TOKEN = "hf_lockTESTtoken0123456789"
SHARDS = {f"model-0000{i}-of-00002.safetensors": bytes([i]) * 1000 for i in (1, 2)}
CONFIG = b'{"model_type": "glm5_next"}'
SHARD_2 = "model-00003-of-00003.safetensors"
FFMPEG_PART = "ffmpeg in the derived image (apt)"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    hub = Hub(token=TOKEN)
    hub.repos[MODEL] = Repo({"config.json": CONFIG, **SHARDS})
    hub.repos[DFLASH2_DRAFT] = Repo({"config.json": b'{"model_type": "dflash2"}'}, gated=True)
    monkeypatch.setenv("HF_ENDPOINT", hub.start("127.0.0.1"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield hub
    hub.stop()


pytestmark = pytest.mark.registry
IMAGE = "lmsysorg/sglang"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    registry = Registry(tmp_path / "registry").start()
    registry.push(IMAGE, "v0.5.20")
    yield registry
    registry.stop()


# What the nodes pip-install, as a package index holds it: what the derived image adds to release
# v0.5.20 on H200 (transformers 5.17.0 and tokenizers>=0.23.1 over the release's own; two
# tokenizers releases: the specifier takes the newest), torchcodec for GB300's arm64 nodes (whose
# v0.5.23 leaves it out there; this index holds 0.17.0 for x86_64 only) and the weights client.
PACKAGES = {
    "transformers-5.17.0-py3-none-any.whl": b"transformers",
    "tokenizers-0.23.1-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": b"tokenizers 0.23.1",
    "tokenizers-0.23.2-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": b"tokenizers x86_64",
    "tokenizers-0.23.2-cp39-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": b"tokenizers arm64",
    "torchcodec-0.17.0-cp312-cp312-manylinux_2_28_x86_64.whl": b"torchcodec x86_64",
    "torchcodec-0.16.0-cp312-cp312-manylinux_2_28_aarch64.whl": b"torchcodec 0.16.0 arm64",
    "huggingface_hub-2.4.0-py3-none-any.whl": b"huggingface_hub",
}
OLDER = "v0.5.20"  # the h200-lowlat stack's release here: its own transformers falls short of the seed


@pytest.fixture
def pypi() -> Iterator[PackageIndex]:
    index = PackageIndex(files=dict(PACKAGES)).start()
    yield index
    index.stop()


@pytest.fixture
def apt() -> Iterator[AptIndex]:
    index = of_catalog().start()
    yield index
    index.stop()


REGION = "us-east-2"  # the catalog stack's
DLAMI = "ami-0a1b2c3d4e5f60718"


@pytest.fixture
def ssm(moto_env: str) -> dict[str, str]:
    """AWS's public SSM parameters (the DLAMI's, Canonical's Ubuntu), served by moto."""
    return publish_catalog(REGION, DLAMI)


@pytest.fixture
def stacks(
    tmp_path: Path, registry: Registry, pypi: PackageIndex, apt: AptIndex, ssm: dict[str, str]
) -> Path:
    folder = tmp_path / "stacks"
    folder.mkdir()
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml", folder)
    # the catalog's image, served by the registry here (the stack names the registry it pulls from)
    edit_spec(folder, "h200-lowlat", image={"repository": f"{registry.address}/{IMAGE}", "version": OLDER})
    # and the packages, from the index the nodes' pip reads (a mirror, named in the site section),
    # and the vendors' apt packages from mirrors of their repositories
    set_site(folder, "h200-lowlat", pypi, apt)
    return folder


def set_site(stacks: Path, name: str, pypi: PackageIndex, apt: AptIndex) -> None:
    path = stacks / f"Pulumi.{name}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"]["site"] = {"pip": {"indexUrl": pypi.simple}, "apt": apt.site_apt()}
    path.write_text(yaml.safe_dump(doc))


def pins(name: str) -> dict[str, str]:
    """Each locked file of `name`'s newest version in PACKAGES, with its sha256."""
    return {
        n: {"sha256": hashlib.sha256(b).hexdigest()} for n, b in PACKAGES.items() if n.startswith(name + "-")
    }


def edit_spec(stacks: Path, name: str, **changes: Any) -> None:
    path = stacks / f"Pulumi.{name}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"].update(changes)
    path.write_text(yaml.safe_dump(doc))


def lock_of(stacks: Path, name: str = "h200-lowlat") -> dict[str, Any]:
    return dict(yaml.safe_load((stacks / f"{name}.lock.yaml").read_text()))


def plan_json(stacks: Path, capsys: pytest.CaptureFixture[str], name: str = "h200-lowlat") -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", name, "--stacks-dir", str(stacks), "--format", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_lock_pins_the_commit_every_file_and_the_image_digest_and_plan_shows_it(
    hub: Hub, registry: Registry, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = f"{registry.address}/{IMAGE}:v0.5.20"
    before = plan_json(stacks, capsys)
    assert before["lock"]["present"] is False
    assert {p["kind"]: p["state"] for p in before["lock"]["parts"]}["weights"] == "floating"
    assert {p["kind"]: p["state"] for p in before["lock"]["parts"]}["image"] == "floating"
    assert before["nodes"][0]["processes"][0]["image"].startswith("flashfleet/sglang:")
    assert any(w.startswith("not repeatable: no h200-lowlat.lock.yaml") for w in before["warnings"])
    assert "the image's tag" in " ".join(before["warnings"])

    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    assert f"locked {MODEL} @ {hub.repos[MODEL].sha} (main, 3 files)" in out
    digest = registry.tag_digest(IMAGE, "v0.5.20")
    assert f"locked {tagged} @ {digest} (linux/amd64)" in out
    lock = lock_of(stacks)
    assert lock["images"] == {tagged: {"digest": digest, "platforms": {"linux/amd64": digest}}}
    entry = lock["weights"][MODEL]
    assert (lock["stack"], entry["revision"], entry["commit"]) == (
        "h200-lowlat",
        "main",
        hub.repos[MODEL].sha,
    )
    assert entry["files"] == {
        "config.json": {"size": len(CONFIG), "git_oid": git_oid(CONFIG)},
        **{n: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in SHARDS.items()},
    }
    # the Hub was asked for the files' metadata of the revision, nothing was downloaded
    assert [r.path for r in hub.requests] == [f"/api/models/{MODEL}/revision/main?blobs=true"]

    after = plan_json(stacks, capsys)
    weights = after["lock"]["parts"][0]
    assert (weights["state"], weights["pinned"]) == ("locked", entry["commit"])
    image = next(p for p in after["lock"]["parts"] if p["kind"] == "image")
    assert (image["name"], image["state"], image["pinned"]) == (tagged, "locked", digest)
    assert after["lock"]["present"] is True
    assert len(after["lock"]["digest"]) == 64
    assert not [w for w in after["warnings"] if w.startswith("not repeatable")]
    # the server loads the locked commit, not what the cache's main ref names
    [server] = after["nodes"][0]["processes"]
    argv = server["argv"]
    assert argv[argv.index("--revision") + 1] == entry["commit"]
    # and the node is handed the lock, to download that commit and check each file
    plan = load_stack("h200-lowlat", stacks)
    inventory = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])
    [hostvars] = inventory["all"]["hosts"].values()
    assert hostvars["flashfleet_weights_lock"][MODEL]["commit"] == entry["commit"]
    assert set(hostvars["flashfleet_weights_lock"][MODEL]["files"]) == set(entry["files"])
    # the node pulls the base by the locked digest (the sglang_image role), whatever the tag names
    assert hostvars["flashfleet_image"] == f"{tagged}@{digest}"


def test_the_packages_the_nodes_install_are_locked_from_their_index_and_handed_to_each_role(
    hub: Hub,
    registry: Registry,
    pypi: PackageIndex,
    apt: AptIndex,
    stacks: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    # the driver's apt packages, in the directory an AWS H200 node's sources name (its DLAMI's
    # Ubuntu 24.04, x86_64), at the catalog's version, not the newer one the repository holds
    index = f"{apt.url}/ubuntu2404/x86_64/"
    driver = ("nvidia-driver-595-open", "nvidia-fabricmanager-595")
    assert f"locked 2 apt packages from {index} ({driver[0]}=595.91.07-1, {driver[1]}=595.91.07-1)\n" in out
    debs = {d.package: d for d in apt.dirs["cuda/repos/ubuntu2404/x86_64"] if d.version == "595.91.07-1"}
    assert lock_of(stacks)["apt"][index] == {
        name: {"version": "595.91.07-1", "sha256": hashlib.sha256(debs[name].data()).hexdigest(),
               "size": len(debs[name].data())}
        for name in driver
    }  # fmt: skip
    assert [r for r in apt.requests if r.startswith("/cuda/")] == [
        "/cuda/repos/ubuntu2404/x86_64/Packages.xz", "/cuda/repos/ubuntu2404/x86_64/Packages.gz",
        "/cuda/repos/ubuntu2404/x86_64/Packages"]  # fmt: skip
    # Docker Engine's (docker-ce and its CLI at the catalog's version, containerd.io the newest) and
    # the container toolkit's four packages, at the catalog's version, from their own directories
    docker, toolkit = (
        f"{apt.root}/docker/linux/ubuntu/dists/noble/stable/binary-amd64/",
        f"{apt.root}/libnvidia-container/stable/deb/amd64/",
    )
    engine = f"5:{node_packages().docker_version}-1~ubuntu.24.04~noble"
    assert (
        f"locked 3 apt packages from {docker} (containerd.io=2.1.5-1~ubuntu.24.04~noble, docker-ce={engine}, docker-ce-cli={engine})\n"
        in out
    )
    assert {n: d["version"] for n, d in lock_of(stacks)["apt"][toolkit].items()} == {
        "libnvidia-container-tools": f"{node_packages().toolkit_version}-1", "libnvidia-container1": f"{node_packages().toolkit_version}-1",
        "nvidia-container-toolkit": f"{node_packages().toolkit_version}-1", "nvidia-container-toolkit-base": f"{node_packages().toolkit_version}-1",
    }  # fmt: skip
    assert set(lock_of(stacks)["apt"]) == {index, docker, toolkit}
    assert "locked tokenizers==0.23.2 (2 files)\n" in out  # the newest the specifier allows
    assert "locked huggingface_hub==2.4.0 (1 files)\n" in out
    assert lock_of(stacks)["packages"] == {
        "huggingface_hub": {"version": "2.4.0", "files": pins("huggingface_hub")},
        "tokenizers": {"version": "0.23.2", "files": {n: h for n, h in pins("tokenizers").items() if "0.23.2" in n}},
        "transformers": {"version": "5.17.0", "files": pins("transformers")},
    }  # fmt: skip
    # the index was asked for the pages alone: its JSON carries the hashes, nothing was fetched
    assert not [r for r in pypi.requests if r.startswith("/files/")]
    parts = {p["name"]: p for p in plan_json(stacks, capsys)["lock"]["parts"] if p["kind"] == "packages"}
    assert (parts["tokenizers"]["state"], parts["tokenizers"]["pinned"]) == ("locked", "0.23.2")
    assert parts["system libraries the vendors' packages depend on (apt)"]["state"] == "floating"
    assert parts["Docker Engine (apt): docker-ce, docker-ce-cli, containerd.io"]["pinned"] == engine
    assert (
        parts["NVIDIA container toolkit (apt): nvidia-container-toolkit"]["pinned"]
        == f"{node_packages().toolkit_version}-1"
    )
    nvidia = parts[f"NVIDIA driver (apt): {', '.join(driver)}"]
    assert (nvidia["state"], nvidia["pinned"]) == ("locked", "595.91.07-1")
    # each role is handed its own: the image's pins to sglang_image, the client to model_weights
    [hostvars] = build_inventory(load_stack("h200-lowlat", stacks), ["198.51.100.7"], ["10.0.0.7"])["all"][
        "hosts"
    ].values()
    assert set(hostvars["flashfleet_image_derived"]["packages"]) == {"transformers", "tokenizers"}
    assert hostvars["flashfleet_weights_client"]["lock"] == lock_of(stacks)["packages"]["huggingface_hub"]
    held = lock_of(stacks)["apt"]
    assert hostvars["flashfleet_apt_lock"] == {
        "nvidia_driver": {index: held[index]}, "container_runtime": {docker: held[docker], toolkit: held[toolkit]},
    }  # fmt: skip

    # the same driver version republished upstream (a new Debian revision): a diff, not written
    republished = Deb(driver[1], "595.91.07-2", body=b"rebuilt")
    apt.dirs["cuda/repos/ubuntu2404/x86_64"].append(republished)
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    diff = capsys.readouterr().out
    sha = hashlib.sha256(b"rebuilt").hexdigest()
    assert f"+    {driver[1]}: {{sha256: {sha}, size: 7, version: 595.91.07-2}}\n" in diff, diff
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written
    apt.dirs["cuda/repos/ubuntu2404/x86_64"].remove(republished)

    # a newer tokenizers on the index moves the lock: a diff, and only --update writes it
    newer = "tokenizers-0.23.3-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    pypi.files[newer] = b"tokenizers 0.23.3"
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    diff = capsys.readouterr().out
    assert "-    version: 0.23.2\n" in diff
    assert f"+      {newer}: {{sha256: {hashlib.sha256(b'tokenizers 0.23.3').hexdigest()}}}\n" in diff
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written
    # and an index that cannot be read is one line, and writes nothing
    pypi.stop()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("flashfleet lock: transformers==5.17.0: ConnectError: "), err
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written


def test_main_moved_upstream_is_a_diff_and_only_update_writes_it(
    hub: Hub, registry: Registry, apt: AptIndex, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    old = hub.repos[MODEL].sha
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    capsys.readouterr()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0  # nothing moved
    tagged, image = f"{registry.address}/{IMAGE}:v0.5.20", registry.tag_digest(IMAGE, "v0.5.20")
    packages = "huggingface_hub==2.4.0, tokenizers==0.23.2, transformers==5.17.0"
    snapshot = lock_of(stacks)["image_apt"][tagged]["snapshot"]
    assert snapshot == f"{apt.root}/snapshot/ubuntu/20260101T000000Z"  # when the stand-in published it
    assert capsys.readouterr().out == (
        f"h200-lowlat.lock.yaml is current: {MODEL} @ {old}, {tagged} @ {image}, {packages}, "
        f"2 apt packages from {apt.url}/ubuntu2404/x86_64/, "
        f"3 apt packages from {apt.root}/docker/linux/ubuntu/dists/noble/stable/binary-amd64/, "
        f"4 apt packages from {apt.root}/libnvidia-container/stable/deb/amd64/, "
        f"{tagged}'s ffmpeg from {snapshot}, "
        f"{DLAMI} (/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id "
        f"in {REGION})\n"
    )

    added = b"\x09" * 999
    new = hub.repos[MODEL].move_main({"config.json": CONFIG, **SHARDS, SHARD_2: added})
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    captured = capsys.readouterr()
    assert f"-    commit: {old}\n" in captured.out
    assert f"+    commit: {new}\n" in captured.out
    assert f"+      {SHARD_2}: {{sha256: {hashlib.sha256(added).hexdigest()}, size: 999}}\n" in captured.out
    assert "`flashfleet lock h200-lowlat --update` writes it" in captured.err
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written  # refused: not written

    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 0
    assert f"+    commit: {new}\n" in capsys.readouterr().out
    assert lock_of(stacks)["weights"][MODEL]["commit"] == new

    # the tag moves in its registry: the same, for the image
    moved = registry.push(IMAGE, "v0.5.20", content=b"rebuilt")
    assert moved != image
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    captured = capsys.readouterr()
    assert f"-    digest: {image}\n" in captured.out
    assert f"+    digest: {moved}\n" in captured.out
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written
    # what the nodes run stays the locked digest until the lock is updated
    plan = load_stack("h200-lowlat", stacks)
    [hostvars] = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])["all"]["hosts"].values()
    assert hostvars["flashfleet_image"] == f"{tagged}@{image}"
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 0
    capsys.readouterr()
    assert lock_of(stacks)["images"][tagged]["digest"] == moved


def test_an_image_pinned_by_the_stack_is_locked_to_that_digest_and_a_disagreement_refused(
    hub: Hub, registry: Registry, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = f"{registry.address}/{IMAGE}:v0.5.20"
    first = registry.tag_digest(IMAGE, "v0.5.20")
    registry.push(IMAGE, "v0.5.20", content=b"rebuilt")  # the tag moved; the stack pins the first
    edit_spec(
        stacks,
        "h200-lowlat",
        image={"repository": f"{registry.address}/{IMAGE}", "version": OLDER, "digest": first},
    )
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert lock_of(stacks)["images"][tagged]["digest"] == first
    # a stack digest that is not the lock's: which one runs is not guessed
    other = registry.push(IMAGE, "v0.5.24-other", content=b"other")
    edit_spec(
        stacks,
        "h200-lowlat",
        image={"repository": f"{registry.address}/{IMAGE}", "version": OLDER, "digest": other},
    )
    capsys.readouterr()
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert f"flashfleet:stack.image.digest: {other} is not the {first} that h200-lowlat.lock.yaml pins" in err
    assert "[rule: lock-image]" in err
    assert len(err.strip().splitlines()) == 1


def test_a_tag_without_the_nodes_architecture_is_refused_and_a_registry_down_is_one_line(
    hub: Hub,
    registry: Registry,
    pypi: PackageIndex,
    apt: AptIndex,
    stacks: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GB300 nodes are arm64: an amd64-only -cu130 tag cannot run there
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.gb300-lowlat.yaml", stacks)
    edit_spec(stacks, "gb300-lowlat", image={"repository": f"{registry.address}/{IMAGE}"})
    set_site(stacks, "gb300-lowlat", pypi, apt)
    registry.push(IMAGE, "v0.5.23-cu130")
    assert main(["lock", "gb300-lowlat", "--stacks-dir", str(stacks)]) == 1
    err = capsys.readouterr().err
    tagged = f"{registry.address}/{IMAGE}:v0.5.23-cu130"
    assert err == f"flashfleet lock: {tagged}: the tag has no linux/arm64 image (it has: linux/amd64)\n"
    # a multi-platform index: locked by the index's digest, each platform's listed
    amd = registry.tag_digest(IMAGE, "v0.5.23-cu130")
    arm = registry.push(IMAGE, "v0.5.23-cu130-arm", arch="arm64")
    index = registry.push_index(IMAGE, "v0.5.23-cu130", {"amd64": amd, "arm64": arm})
    # the torchcodec the derived image adds on arm64 has only an x86_64 wheel on this index
    assert main(["lock", "gb300-lowlat", "--stacks-dir", str(stacks)]) == 1
    page = f"{pypi.simple}torchcodec/"
    assert capsys.readouterr().err == (
        f"flashfleet lock: torchcodec==0.17.0: {page} has no linux arm64 wheel of 0.17.0 (nearest with one: 0.16.0)\n"
    )
    assert not (stacks / "gb300-lowlat.lock.yaml").exists()
    arm_wheel = "torchcodec-0.17.0-cp312-cp312-manylinux_2_28_aarch64.whl"
    pypi.files[arm_wheel] = b"torchcodec arm64"
    assert main(["lock", "gb300-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert lock_of(stacks, "gb300-lowlat")["packages"]["torchcodec"]["version"] == "0.17.0"
    assert arm_wheel in lock_of(stacks, "gb300-lowlat")["packages"]["torchcodec"]["files"]
    assert lock_of(stacks, "gb300-lowlat")["images"][tagged] == {
        "digest": index, "platforms": {"linux/amd64": amd, "linux/arm64": arm},
    }  # fmt: skip
    registry.stop()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet lock: {registry.address}/{IMAGE}:v0.5.20: ConnectError: ")
    assert len(err.strip().splitlines()) == 1
    assert not (stacks / "h200-lowlat.lock.yaml").exists()


def test_the_gated_draft_is_locked_with_the_token_only(
    hub: Hub, stacks: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    edit_spec(stacks, "h200-lowlat", options={"speculative": "dflash2"})
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f"flashfleet lock: {DFLASH2_DRAFT}@main: the Hub answered 401 (gated: set HF_TOKEN to a token with access)\n"
    )
    assert not (stacks / "h200-lowlat.lock.yaml").exists()

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    # the stand-in Hub speaks plain http: the token goes there only where the stack says so
    stack_file = stacks / "Pulumi.h200-lowlat.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"]["flashfleet:stack"]["site"]["hub"] = {"tokenOverHttp": True}
    stack_file.write_text(yaml.safe_dump(doc))
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert set(lock_of(stacks)["weights"]) == {MODEL, DFLASH2_DRAFT}
    assert TOKEN not in (stacks / "h200-lowlat.lock.yaml").read_text()
    argv = plan_json(stacks, capsys)["nodes"][0]["processes"][0]["argv"]
    draft = hub.repos[DFLASH2_DRAFT].sha
    assert argv[argv.index("--speculative-draft-model-revision") + 1] == draft


def test_lock_required_refuses_a_stack_without_one_and_lock_still_writes_it(
    hub: Hub, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_spec(stacks, "h200-lowlat", lock="required")
    for command in ("plan", "validate"):
        assert main([command, "h200-lowlat", "--stacks-dir", str(stacks)]) == 2
        err = capsys.readouterr().err
        assert (
            "flashfleet:stack.lock: required, but no h200-lowlat.lock.yaml: the nodes fetch "
            f"{MODEL}, the image's tag, transformers==5.17.0, tokenizers>=0.23.1, "
            "huggingface_hub==2.4.0, the NVIDIA driver's apt packages, the Docker Engine's apt packages, "
            "the NVIDIA container toolkit's apt packages, the derived image's apt packages, the GPU nodes' "
            "AMI as each is on the day: run "
            "`flashfleet lock h200-lowlat` "
            "[rule: lock-required]"
        ) in err, err
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert plan_json(stacks, capsys)["lock"]["required"] is True

    # the recipe then loads a repository the lock does not pin: refused again, named
    edit_spec(stacks, "h200-lowlat", options={"speculative": "dflash2"})
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert f"h200-lowlat.lock.yaml does not pin {DFLASH2_DRAFT}" in err
    assert "run `flashfleet lock h200-lowlat --update`" in err


def test_without_lock_required_a_stale_lock_is_a_warning(
    hub: Hub, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    edit_spec(stacks, "h200-lowlat", options={"speculative": "dflash2"})
    plan = plan_json(stacks, capsys)
    assert f"not repeatable: h200-lowlat.lock.yaml does not pin {DFLASH2_DRAFT}" in " ".join(plan["warnings"])
    states = {p["name"]: p["state"] for p in plan["lock"]["parts"] if p["kind"] == "weights"}
    assert states == {MODEL: "locked", DFLASH2_DRAFT: "floating"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d["weights"][MODEL].update(commit="main"), f"weights.{MODEL}.commit: String should match pattern"),
        (lambda d: d.update(stack="gb300-lowlat"), "h200-lowlat.lock.yaml: stack: locks stack gb300-lowlat, not h200-lowlat"),
        (lambda d: d.update(extra=1), "h200-lowlat.lock.yaml: extra: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_a_broken_lock_is_refused_naming_the_file(
    hub: Hub, stacks: Path, capsys: pytest.CaptureFixture[str], change: Any, says: str
) -> None:
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    doc = lock_of(stacks)
    change(doc)
    (stacks / "h200-lowlat.lock.yaml").write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_hub_that_does_not_answer_is_one_line(
    stacks: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet lock: {MODEL}@main: ConnectError: ")
    assert len(err.strip().splitlines()) == 1
    assert not (stacks / "h200-lowlat.lock.yaml").exists()


def test_the_fingerprint_carries_the_lock_and_names_a_node_that_holds_another_commit(
    hub: Hub, stacks: Path
) -> None:
    from flashfleet.bench.fingerprint import make_fingerprint, served_commits
    from flashfleet.bench.node_facts import NodeFacts, from_bringup, with_node_facts

    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    plan = load_stack("h200-lowlat", stacks)
    assert plan.lock is not None
    pinned = plan.lock.weights[MODEL].commit
    inventory = build_inventory(plan, ["198.51.100.7"], ["10.0.0.7"])
    [host] = inventory["all"]["hosts"]
    other = "9" * 40
    deployment = with_node_facts(
        from_bringup(plan), inventory, NodeFacts({host: {"weights": {MODEL: other}}})
    )
    assert deployment.notes == (f"{host} holds {MODEL} at {other}, the lock pins {pinned}",)
    fp = make_fingerprint(deployment, recipe=None, profile="p", bench_argv=[], endpoint="http://x")
    assert fp["weights"] == {
        "lock_digest": plan.lock.digest,
        "locked": {MODEL: pinned},
        "on_nodes": {host: {MODEL: other}},
    }
    assert served_commits(fp) == {MODEL: other}  # what the node served, over what was locked


def test_the_derived_image_s_ffmpeg_is_locked_to_a_snapshot_that_update_alone_moves(
    hub: Hub, registry: Registry, apt: AptIndex, stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base's labels name Ubuntu 24.04: FFmpeg is resolved in a snapshot of noble's archive, at
    the moment the archive published what it serves now (not the clock's). The archive moving
    afterwards leaves the lock current (its snapshot does not move); `--update` takes the new
    moment and shows FFmpeg's new build as a diff. A base whose labels name no distribution leaves
    it floating, said on stderr."""
    from hosts.aptindex import FFMPEG, FIRST_MOMENT, UBUNTU_SNAPSHOTS, ubuntu_snapshot

    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    tagged = f"{registry.address}/{IMAGE}:v0.5.20"
    entry = lock_of(stacks)["image_apt"][tagged]
    assert entry["snapshot"] == f"{apt.root}/{UBUNTU_SNAPSHOTS}/{FIRST_MOMENT}"
    assert (entry["distribution"], entry["arch"], entry["components"]) == (
        "ubuntu noble",
        "amd64",
        ["main", "universe"],
    )
    [first] = apt.snapshots[UBUNTU_SNAPSHOTS]
    [ffmpeg] = first.dirs["dists/noble/universe/binary-amd64"]
    assert entry["packages"] == {
        "ffmpeg": {
            "version": FFMPEG,
            "sha256": hashlib.sha256(ffmpeg.data()).hexdigest(),
            "size": len(ffmpeg.data()),
        }
    }
    assert entry["suites"] == {
        s: hashlib.sha256(first.release(s) or b"").hexdigest()
        for s in ("noble", "noble-updates", "noble-security")
    }
    assert (
        f"locked the derived image's ffmpeg={FFMPEG} on {tagged} (ubuntu noble) from {entry['snapshot']}\n"
        in out
    )
    [part] = [p for p in plan_json(stacks, capsys)["lock"]["parts"] if p["name"] == FFMPEG_PART]
    assert (part["state"], part["pinned"]) == ("locked", FFMPEG)

    # Ubuntu publishes a new FFmpeg build in -updates: a later snapshot has it, the locked one not
    newer = "7:6.1.1-3ubuntu5.1"
    later = "20260601T000000Z"
    apt.snapshots[UBUNTU_SNAPSHOTS].append(ubuntu_snapshot(later, updates=newer))
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert "is current" in capsys.readouterr().out
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 0
    diff = capsys.readouterr().out
    assert f"-      ffmpeg: {{sha256: {entry['packages']['ffmpeg']['sha256']}" in diff, diff
    assert f"version: '{newer}'" in diff or f"version: {newer}" in diff, diff
    assert lock_of(stacks)["image_apt"][tagged]["packages"]["ffmpeg"]["version"] == newer
    assert lock_of(stacks)["image_apt"][tagged]["snapshot"] == f"{apt.root}/{UBUNTU_SNAPSHOTS}/{later}"

    # a base built without the labels: nothing to resolve FFmpeg in, said, and left floating
    registry.push(IMAGE, "v0.5.20", labels={})
    (stacks / "h200-lowlat.lock.yaml").unlink()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    err = capsys.readouterr().err
    assert (
        f"flashfleet lock: {tagged} does not name a distribution whose archive flashfleet knows (its labels "
        "org.opencontainers.image.ref.name and org.opencontainers.image.version: ? ?); the derived image's "
        "apt packages stay floating\n"
    ) == err, err
    assert "image_apt" not in lock_of(stacks)
    [part] = [p for p in plan_json(stacks, capsys)["lock"]["parts"] if p["name"] == FFMPEG_PART]
    assert part["state"] == "floating"


def test_the_nodes_ami_is_locked_to_the_id_the_ssm_parameter_names_and_moves_only_with_update(
    hub: Hub,
    stacks: Path,
    ssm: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DLAMI's SSM parameter (AWS's, read with the stack's credentials through moto) names an
    id; the lock holds it for the stack's region and the nodes boot it. AWS publishing a new DLAMI
    is a diff, written by --update alone. Without credentials the AMI stays floating, said."""
    parameter = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    assert f"locked {DLAMI}: what {parameter} names in {REGION}\n" in capsys.readouterr().out
    assert lock_of(stacks)["amis"] == {parameter: {"region": REGION, "ami": DLAMI}}
    [part] = [p for p in plan_json(stacks, capsys)["lock"]["parts"] if p["name"] == "the GPU nodes' AMI"]
    assert (part["state"], part["pinned"]) == ("locked", DLAMI)
    assert part["detail"].startswith(f"what {parameter} named in {REGION} as of ")

    newer = "ami-0fedcba9876543210"
    publish(REGION, parameter, newer)  # AWS releases a new DLAMI
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 1
    out, err = capsys.readouterr()
    assert f"-  {parameter}: {{ami: {DLAMI}, region: {REGION}}}\n" in out, out
    assert f"+  {parameter}: {{ami: {newer}, region: {REGION}}}\n" in out, out
    assert "no longer matches the Hub, the registry, the package indexes or SSM" in err
    assert lock_of(stacks)["amis"][parameter]["ami"] == DLAMI
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 0
    assert lock_of(stacks)["amis"][parameter]["ami"] == newer
    # a parameter SSM does not have in the region: named, and nothing written
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ssm.models import ssm_backends

    published = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]._parameters.pop(parameter)
    written = (stacks / "h200-lowlat.lock.yaml").read_bytes()
    capsys.readouterr()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 1
    assert (
        capsys.readouterr().err
        == f"flashfleet lock: {parameter} in {REGION}: SSM answered ParameterNotFound\n"
    )
    assert (stacks / "h200-lowlat.lock.yaml").read_bytes() == written
    ssm_backends[DEFAULT_ACCOUNT_ID][REGION]._parameters[parameter] = published

    # no credentials (and none of this machine's): said, and left floating; lock: required names it
    (stacks / "h200-lowlat.lock.yaml").unlink()
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(stacks / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(stacks / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    capsys.readouterr()
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks)]) == 0
    err = capsys.readouterr().err
    assert err == (
        "flashfleet lock: no AWS credentials to read the AMIs' SSM parameters: the GPU nodes' AMI stay "
        "floating (each parameter as it is at bring-up)\n"
    ), err
    assert "amis" not in lock_of(stacks)
    edit_spec(stacks, "h200-lowlat", lock="required")
    assert main(["validate", "h200-lowlat", "--stacks-dir", str(stacks)]) == 2
    assert "does not pin the GPU nodes' AMI (the stack changed" in capsys.readouterr().err
    # the stack's own AMI id is pinned as it is: nothing to read, and nothing floats
    spec = yaml.safe_load((stacks / "Pulumi.h200-lowlat.yaml").read_text())["config"]["flashfleet:stack"]
    spec["nodes"]["source"]["ami"] = "ami-0123456789abcdef0"
    edit_spec(stacks, "h200-lowlat", nodes=spec["nodes"], lock="optional")
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(stacks), "--update"]) == 0
    assert "AWS credentials" not in capsys.readouterr().err
    assert "amis" not in lock_of(stacks)
    [part] = [p for p in plan_json(stacks, capsys)["lock"]["parts"] if p["name"] == "the GPU nodes' AMI"]
    assert (part["state"], part["pinned"], part["detail"]) == (
        "locked",
        "ami-0123456789abcdef0",
        "the stack's nodes.source.ami",
    )
