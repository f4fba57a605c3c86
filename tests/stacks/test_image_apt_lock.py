"""What the derived image apt-installs from its base's distribution archive (FFmpeg) in a stack's
lock: the base's distribution from its labels (flashfleet.planning.image_apt), a snapshot of that
archive resolved against a stand-in snapshot service on loopback (tests/hosts/aptindex.py, which
serves a moment as the newest snapshot at or before it, as snapshot.ubuntu.com does), how the lock
carries it, and what `plan`, `lock: required` and the inventory make of it. `flashfleet lock`
writing it is tests/cli/test_lock_cli.py's; a real `docker build` installing from the snapshot and
refusing other bytes, tests/engine/test_derived_image_build.py's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.aptindex import FFMPEG, FIRST_MOMENT, UBUNTU_SNAPSHOTS, AptIndex, ubuntu_snapshot

from flashfleet.apt_index import AptIndexError, published_moment, resolve_snapshot
from flashfleet.catalog import hardware_catalog
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.planning.image_apt import distribution, image_apt_lock, image_apt_want
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.lock import (
    LockedDeb,
    LockedFile,
    LockedImageApt,
    LockedRepo,
    StackLock,
    dump_lock,
    read_lock,
)

UPDATES_1, UPDATES_2 = "7:6.1.1-3ubuntu5.1", "7:6.1.1-3ubuntu5.2"
LATER = "20261201T000000Z"
NOBLE = ("noble", "noble-updates", "noble-security")
H200 = hardware_catalog()["h200"]
BASE = "lmsysorg/sglang:v0.5.23"


@pytest.fixture
def archive() -> Iterator[AptIndex]:
    index = AptIndex(
        snapshots={
            UBUNTU_SNAPSHOTS: [ubuntu_snapshot(updates=UPDATES_1), ubuntu_snapshot(LATER, updates=UPDATES_2)]
        }
    ).start()
    yield index
    index.stop()


def test_the_base_s_labels_name_its_distribution() -> None:
    def labels(name: str, version: str) -> dict[str, str]:
        return {"org.opencontainers.image.ref.name": name, "org.opencontainers.image.version": version}

    assert distribution(labels("ubuntu", "24.04")) == "ubuntu noble"
    assert distribution(labels("ubuntu", "22.04")) == "ubuntu jammy"
    assert distribution(labels("debian", "12")) == "debian bookworm"
    assert distribution(labels("ubuntu", "25.10")) is None  # a release the catalog has no codename of
    assert distribution(labels("alpine", "3.20")) is None  # not an apt archive the catalog knows
    assert distribution({}) is None  # a base built without the labels


def test_the_want_follows_the_node_s_architecture_and_a_mirror_in_role_vars() -> None:
    want = image_apt_want(H200, {}, "ubuntu noble")
    assert (want.archive, want.suites, want.components, want.arch, want.install) == (
        "https://snapshot.ubuntu.com/ubuntu", NOBLE, ("main", "universe"), "amd64", ("ffmpeg",),
    )  # fmt: skip
    arm = image_apt_want(hardware_catalog()["gb300"], {}, "ubuntu jammy")
    assert (arm.archive, arm.suites[0], arm.arch) == (
        "https://snapshot.ubuntu.com/ubuntu-ports",
        "jammy",
        "arm64",
    )
    mirror = image_apt_want(H200, {"sglang_image_apt_archive": "http://mirror.test/ubuntu"}, "ubuntu noble")
    assert mirror.snapshot("20261206T101500Z") == "http://mirror.test/ubuntu/20261206T101500Z"


def test_a_snapshot_resolves_each_suite_s_index_and_the_newest_package_at_that_moment(
    archive: AptIndex,
) -> None:
    def at(moment: str, arch: str = "amd64") -> tuple[dict[str, str], dict[str, LockedDeb]]:
        return resolve_snapshot(
            f"{archive.root}/{UBUNTU_SNAPSHOTS}/{moment}", NOBLE, ("main", "universe"), arch, ["ffmpeg"]
        )

    suites, packages = at("20260601T120000Z")  # between the two: the first snapshot's archive
    first = archive.snapshots[UBUNTU_SNAPSHOTS][0]
    assert suites == {s: hashlib.sha256(first.release(s) or b"").hexdigest() for s in NOBLE}
    # -updates holds a newer build than the release: apt takes the newest of the suites
    assert packages["ffmpeg"].version == UPDATES_1
    [deb] = first.dirs["dists/noble-updates/universe/binary-amd64"]
    assert packages == {"ffmpeg": LockedDeb(version=UPDATES_1, sha256=hashlib.sha256(deb.data()).hexdigest(),
                                           size=len(deb.data()))}  # fmt: skip
    later_suites, later = at("20261206T000000Z")
    assert later["ffmpeg"].version == UPDATES_2
    assert later_suites != suites  # the archive moved between the moments
    assert at("20260601T120000Z", "arm64")[1]["ffmpeg"].version == UPDATES_1
    with pytest.raises(AptIndexError, match=r"/dists/noble/InRelease: the archive answered 404"):
        at("20251231T235959Z")  # before the service's first snapshot
    where = f"{archive.root}/{UBUNTU_SNAPSHOTS}/{LATER}"
    with pytest.raises(
        AptIndexError, match=r"no ffmpeg for amd64 in noble, noble-updates, noble-security \(main\)"
    ):
        resolve_snapshot(where, NOBLE, ("main",), "amd64", ["ffmpeg"])  # FFmpeg is in universe
    with pytest.raises(AptIndexError, match=r"dists/noble/main/binary-riscv64/: no Packages index"):
        resolve_snapshot(where, NOBLE, ("main",), "riscv64", ["ffmpeg"])


def test_the_moment_a_lock_takes_is_when_the_archive_published_what_it_serves(archive: AptIndex) -> None:
    """The clock's moment may be newer than the service has settled; the newest InRelease Date of
    the suites is when the archive published what the snapshot serves, and serves the same."""
    where = f"{archive.root}/{UBUNTU_SNAPSHOTS}"
    assert published_moment(f"{where}/20261206T213000Z", NOBLE) == LATER
    assert published_moment(f"{where}/20260601T120000Z", NOBLE) == FIRST_MOMENT
    at_now = resolve_snapshot(f"{where}/20261206T213000Z", NOBLE, ("main", "universe"), "amd64", ["ffmpeg"])
    assert resolve_snapshot(f"{where}/{LATER}", NOBLE, ("main", "universe"), "amd64", ["ffmpeg"]) == at_now


def _image_apt(**changes: Any) -> LockedImageApt:
    entry = {
        "distribution": "ubuntu noble", "arch": "amd64",
        "snapshot": f"https://snapshot.ubuntu.com/ubuntu/{FIRST_MOMENT}", "components": ["main", "universe"],
        "suites": {s: "e" * 64 for s in NOBLE},
        "packages": {"ffmpeg": {"version": FFMPEG, "sha256": "f" * 64, "size": 3}},
    }  # fmt: skip
    return LockedImageApt.model_validate(entry | changes)


def _lock(image_apt: dict[str, LockedImageApt]) -> StackLock:
    repo = LockedRepo(
        revision="main", commit="c" * 40, files={"config.json": LockedFile(size=2, git_oid="d" * 40)}
    )
    return StackLock(stack="h200-lowlat", locked_on="2026-12-06", weights={"m/m": repo}, image_apt=image_apt)


def test_the_lock_carries_the_snapshot_and_a_lock_without_it_hashes_as_before(tmp_path: Path) -> None:
    lock = _lock({BASE: _image_apt()})
    path = tmp_path / "h200-lowlat.lock.yaml"
    path.write_text(dump_lock(lock))
    assert read_lock(path) == lock
    assert "image_apt:" in path.read_text()
    without = _lock({})
    assert "image_apt" not in dump_lock(without)  # a lock from before reads back the same
    assert (
        without.digest
        == hashlib.sha256(
            without.model_dump_json(
                exclude={"locked_on", "packages", "apt", "image_apt", "amis"}, exclude_none=True
            ).encode()
        ).hexdigest()
    )
    assert lock.digest != without.digest
    moved = _lock({BASE: _image_apt(snapshot=f"https://snapshot.ubuntu.com/ubuntu/{LATER}")})
    assert moved.digest != lock.digest


def test_the_lock_answers_only_for_the_archive_arch_and_packages_the_stack_names() -> None:
    spec = load_stack("h200-lowlat").spec
    assert spec.image.tagged_ref(H200) == BASE
    held = _image_apt()
    assert image_apt_lock(spec, H200, {}, _lock({BASE: held})) == held
    assert image_apt_lock(spec, H200, {}, None) is None
    assert image_apt_lock(spec, H200, {}, _lock({"lmsysorg/sglang:v0.5.22": held})) is None  # another base
    assert image_apt_lock(spec, H200, {}, _lock({BASE: _image_apt(arch="arm64")})) is None
    # a mirror the stack now names: a snapshot of another archive is stale
    mirror = {"sglang_image_apt_archive": "http://mirror.test/ubuntu"}
    assert image_apt_lock(spec, H200, mirror, _lock({BASE: held})) is None
    mirrored = _image_apt(snapshot=f"http://mirror.test/ubuntu/{FIRST_MOMENT}")
    assert image_apt_lock(spec, H200, mirror, _lock({BASE: mirrored})) == mirrored
    other = _image_apt(packages={"libavcodec60": {"version": FFMPEG, "sha256": "f" * 64, "size": 3}})
    assert image_apt_lock(spec, H200, {}, _lock({BASE: other})) is None
    assert image_apt_lock(spec, H200, {}, _lock({BASE: _image_apt(suites={"noble": "e" * 64})})) is None


def _folder(tmp_path: Path, held: StackLock | None, **spec: Any) -> Path:
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml").read_text())
    doc["config"]["flashfleet:stack"].update(spec)
    tmp_path.mkdir(parents=True)
    (tmp_path / "Pulumi.h200-lowlat.yaml").write_text(yaml.safe_dump(doc))
    if held is not None:
        (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(held))
    return tmp_path


def _parts(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], list[str]]:
    capsys.readouterr()
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(folder), "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    parts = {p["name"]: p for p in view["lock"]["parts"]}
    return parts, [w for w in view["warnings"] if "not repeatable" in w]


def test_plan_lock_required_and_the_inventory_see_the_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "ffmpeg in the derived image (apt)"
    parts, [warning] = _parts(_folder(tmp_path / "none", None), capsys)
    assert parts[name]["state"] == "floating"
    assert (
        "from the base image's distribution archive as it is on the day of the build" in parts[name]["detail"]
    )
    assert "the derived image's apt packages" in warning

    folder = _folder(tmp_path / "held", _lock({BASE: _image_apt()}))
    parts, [warning] = _parts(folder, capsys)
    assert (parts[name]["state"], parts[name]["pinned"]) == ("locked", FFMPEG)
    assert (
        f"ubuntu noble amd64, from the archive's snapshot https://snapshot.ubuntu.com/ubuntu/{FIRST_MOMENT}"
        in (parts[name]["detail"])
    )
    assert "the derived image's apt packages" not in warning  # other parts are still floating
    # the inventory hands the build exactly the lock's entry
    plan = load_stack("h200-lowlat", folder)
    [host] = build_inventory(plan, ["192.0.2.1"], ["10.0.0.1"])["all"]["hosts"].values()
    assert host["flashfleet_image_derived"]["apt"] == _image_apt().model_dump(mode="json")
    # a stale entry (another arch) is floating, and the build gets none
    stale = _folder(tmp_path / "stale", _lock({BASE: _image_apt(arch="arm64")}))
    parts, [warning] = _parts(stale, capsys)
    assert parts[name]["state"] == "floating"
    assert "the derived image's apt packages" in warning
    [host] = build_inventory(load_stack("h200-lowlat", stale), ["192.0.2.1"], ["10.0.0.1"])["all"][
        "hosts"
    ].values()
    assert host["flashfleet_image_derived"].get("apt") is None
    # `lock: required` names it
    required = _folder(tmp_path / "required", _lock({BASE: _image_apt(arch="arm64")}), lock="required")
    capsys.readouterr()
    assert main(["validate", "h200-lowlat", "--stacks-dir", str(required)]) == 2
    assert "the derived image's apt packages" in capsys.readouterr().err
    # a stack that runs its base as it is builds nothing: no such part
    parts, _ = _parts(
        _folder(tmp_path / "base", None, image={"version": "v0.5.23", "derived": False}), capsys
    )
    assert name not in parts


def test_plan_shows_an_aws_node_s_ami_floating_on_the_ssm_parameter_and_locked_by_an_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The DLAMI SSM parameter names each new release as it comes; an AMI id names one for good:
    the stack's own, or the one the lock holds for the stack's region."""
    from flashfleet.planning.node_images import dlami_parameter
    from flashfleet.stack.lock import LockedAmi

    name = "the GPU nodes' AMI"
    parameter = dlami_parameter("x86_64", "ubuntu-24.04")
    parts, [warning] = _parts(_folder(tmp_path / "ssm", None), capsys)
    assert (parts[name]["state"], parts[name]["kind"]) == ("floating", "node-image")
    assert parts[name]["detail"] == f"{parameter}: whatever release it names at bring-up"
    assert "the GPU nodes' AMI" in warning
    held = _lock({}).model_copy(
        update={"amis": {parameter: LockedAmi(region="us-east-2", ami="ami-0abc1234")}}
    )
    parts, [warning] = _parts(_folder(tmp_path / "held", held), capsys)
    assert (parts[name]["state"], parts[name]["pinned"]) == ("locked", "ami-0abc1234")
    assert parts[name]["detail"] == f"what {parameter} named in us-east-2 as of 2026-12-06"
    assert "AMI" not in warning
    # an id locked in another region is not this region's image
    other = held.model_copy(update={"amis": {parameter: LockedAmi(region="us-west-2", ami="ami-0abc1234")}})
    parts, _ = _parts(_folder(tmp_path / "other", other), capsys)
    assert parts[name]["state"] == "floating"
    source = load_stack("h200-lowlat").spec.nodes.source.model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    pinned = _folder(
        tmp_path / "ami", None, nodes={"count": 1, "source": {**source, "ami": "ami-0123456789abcdef0"}}
    )
    parts, _ = _parts(pinned, capsys)
    assert (parts[name]["state"], parts[name]["pinned"]) == ("locked", "ami-0123456789abcdef0")
    # an existing host brings its own OS: no such part
    parts, _ = _parts(_folder(tmp_path / "host", None, nodes=_existing_nodes()), capsys)
    assert name not in parts


def _existing_nodes() -> dict[str, Any]:
    from hosts.aptindex import existing_spec

    return existing_spec("h200").nodes.model_dump(by_alias=True, exclude_none=True, mode="json")
