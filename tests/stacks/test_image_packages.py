"""What the serving image holds of the multimodal packages, per node platform: what the release's
own wheel requires (its Requires-Dist, markers evaluated for the node), and what the derived image
adds for the seed. Refusals of a stack's own pins the release or torchcodec's table contradict, at
validate; a lock pin with no wheel for the nodes' platform, at lock and validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.catalog import hardware_catalog
from flashfleet.catalog.multimodal_packages import ReleaseRequirements, image_packages_catalog
from flashfleet.cli import main
from flashfleet.inventory import build_inventory
from flashfleet.package_index import PackageIndexError, fits, resolve_package
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.image_packages import ImagePinError, image_packages
from flashfleet.stack.lock import LockedFile, LockedPackage, LockedRepo, StackLock, dump_lock

HW = hardware_catalog()
# sglang 0.5.23's own wheel (METADATA, Requires-Dist), as `pip download sglang==0.5.23` reads it
ARM_EXCLUDED = (
    'sys_platform != "linux" or (sys_platform == "linux" and platform_machine != "aarch64" '
    'and platform_machine != "arm64" and platform_machine != "armv7l")'
)
RELEASE = ReleaseRequirements(
    source="a release's wheel",
    requires=(
        "tokenizers==0.23.2",
        "torch==2.14.1",
        f"torchcodec==0.17.0; {ARM_EXCLUDED}",
        "transformers==5.19.0",
    ),
)


def _held(hw: str, **pins: str) -> dict[str, tuple[str, str]]:
    held = image_packages("v9.9.9", HW[hw], pins, release=RELEASE)  # type: ignore[arg-type]
    return {p.name: (p.specifier, p.origin) for p in held.packages}


def test_x86_64_takes_every_package_from_the_release() -> None:
    assert _held("h200") == {
        "transformers": ("==5.19.0", "release"),
        "tokenizers": ("==0.23.2", "release"),
        "torchcodec": ("==0.17.0", "release"),
    }


def test_aarch64_adds_the_torchcodec_the_release_pairs_with_the_same_torch_elsewhere() -> None:
    held = image_packages("v9.9.9", HW["gb300"], release=RELEASE)
    assert held.platform == "linux/arm64"
    assert [(p.requirement, p.origin) for p in held.installs] == [("torchcodec==0.17.0", "derived")]
    assert "leaves torchcodec out on this platform" in held.installs[0].why
    assert held.video is None


def test_the_rocm_image_holds_no_known_torchcodec_and_video_stays_unverified() -> None:
    held = image_packages("v9.9.9", HW["mi355x"], release=RELEASE)
    assert held.torch is None
    assert held.get("torchcodec") is None
    assert held.video is not None
    assert "AMD's torch" in held.video
    with pytest.raises(ImagePinError, match=r"0.17.0 has no known build for the ROCm image's torch"):
        image_packages("v9.9.9", HW["mi355x"], {"torchcodec": "0.17.0"}, release=RELEASE)


def test_a_release_below_the_seed_gets_the_seed_s_transformers_over_its_own() -> None:
    old = ReleaseRequirements(
        source="old", requires=("transformers==5.12.1", "tokenizers==0.22.2", "torch==2.13.0")
    )
    held = image_packages("v9.9.9", HW["h200"], release=old)
    transformers, tokenizers = held.get("transformers"), held.get("tokenizers")
    assert transformers is not None
    assert tokenizers is not None
    # the seed's own release, replacing the release's pin on purpose (pip check accepts that one)
    assert (transformers.specifier, transformers.origin, transformers.overrides) == (
        "==5.17.0",
        "derived",
        "==5.12.1",
    )
    assert (tokenizers.specifier, tokenizers.origin, tokenizers.overrides) == (
        ">=0.23.1",
        "derived",
        "==0.22.2",
    )
    # no torchcodec pinned anywhere: none is added, and video is not claimed
    assert held.get("torchcodec") is None
    assert held.video is not None


def test_an_unknown_release_asks_only_the_seed_s_floors_and_says_so() -> None:
    held = image_packages("v9.9.9", HW["h200"])
    assert held.source.startswith("unknown: the catalog has no requirements for v9.9.9")
    assert [p.requirement for p in held.installs] == ["transformers>=5.17.0", "tokenizers>=0.23.1"]
    assert held.video is not None


@pytest.mark.parametrize(
    ("pins", "field", "message"),
    [
        # the pins the derived image shipped before: each contradicted, naming both versions and the source
        ({"torchcodec": "0.9.1"}, "torchcodec", r"0.9.1 loads beside torch==2.9.\* \(torchcodec README"),
        (
            {"transformers": "5.17.0"},
            "transformers",
            r"5.17.0 is below the release v9.9.9's own transformers==5.19.0",
        ),
        (
            {"tokenizers": "0.23.1"},
            "tokenizers",
            r"0.23.1 is below the release v9.9.9's own tokenizers==0.23.2",
        ),
        (
            {"transformers": "5.12.1"},
            "transformers",
            r"5.12.1 is refused .*answers image requests from the text",
        ),
        ({"tokenizers": "0.22.9"}, "tokenizers", r"0.22.9 is below the seed's tokenizers>=0.23.1"),
        # a torchcodec the table does not list: trusted only as the release's own pairing
        (
            {"torchcodec": "0.18.0"},
            "torchcodec",
            r"0.18.0 is not in .* pairs torchcodec==0.17.0 with torch==2.14.1",
        ),
    ],
)
def test_a_stack_pin_the_release_or_the_table_contradicts_is_refused(
    pins: Any, field: str, message: str
) -> None:
    with pytest.raises(ImagePinError, match=message) as err:
        image_packages("v9.9.9", HW["gb300"], pins, release=RELEASE)
    assert err.value.field == f"image.packages.{field}"


def test_a_stack_pin_the_table_allows_is_installed_by_the_derived_image() -> None:
    assert _held("gb300", torchcodec="0.16.0")["torchcodec"] == ("==0.16.0", "derived")
    assert _held("h200", transformers="5.20.0")["transformers"] == ("==5.20.0", "derived")
    # on x86_64 the release ships torchcodec: another one is refused, not installed over it
    with pytest.raises(
        ImagePinError, match=r"0.16.0 differs from the release v9.9.9's own torchcodec==0.17.0"
    ):
        image_packages("v9.9.9", HW["h200"], {"torchcodec": "0.16.0"}, release=RELEASE)


def test_the_catalog_s_releases_are_read_strictly_and_pair_torchcodec_as_the_table_says() -> None:
    catalog = image_packages_catalog()
    for version, release in catalog.releases.items():
        for hw in HW.values():
            held = image_packages(version, hw, release=release)  # no release of the catalog is refused
            codec = held.get("torchcodec")
            wants = None if codec is None else catalog.torchcodec.torch_for(codec.specifier[2:])
            if codec is not None and wants is not None and held.torch is not None:
                from packaging.specifiers import SpecifierSet

                assert SpecifierSet(wants).contains(held.torch[2:]), (version, hw.id)


def _stack(tmp_path: Path, stack: str = "gb300-lowlat", **image: Any) -> Path:
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["flashfleet:stack"]["image"] = {
        **doc["config"]["flashfleet:stack"].get("image", {}),
        **image,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_validate_refuses_the_old_torchcodec_pin_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _stack(tmp_path, packages={"torchcodec": "0.9.1"})
    assert main(["validate", "gb300-lowlat", "--stacks-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    [line] = [ln for ln in err.splitlines() if "image.packages.torchcodec" in ln]
    assert "0.9.1 loads beside torch==2.9.*" in line
    assert "runs torch==2.14.1 (sglang 0.5.23 wheel METADATA on PyPI)" in line
    assert "Traceback" not in err


def test_validate_refuses_a_version_that_is_not_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _stack(tmp_path, packages={"transformers": ">=5.19"})
    assert main(["validate", "gb300-lowlat", "--stacks-dir", str(folder)]) == 2
    assert "not an exact release version like 5.19.0" in capsys.readouterr().err


def test_the_image_version_alone_moves_what_the_derived_image_installs(tmp_path: Path) -> None:
    def pins(folder: Path | None, stack: str) -> list[dict[str, Any]]:
        plan = load_stack(stack, folder) if folder else load_stack(stack)
        [host] = build_inventory(plan, ["192.0.2.1"], ["10.0.0.1"])["all"]["hosts"].values()
        derived = host["flashfleet_image_derived"]
        return [p for p in derived["pins"] if p["install"]]

    assert pins(None, "h200-lowlat") == []  # v0.5.23 ships what the seed needs on x86_64
    older = _stack(tmp_path, "h200-lowlat", version="v0.5.20")
    assert [(p["name"], p["specifier"], p["overrides"]) for p in pins(older, "h200-lowlat")] == [
        ("transformers", "==5.17.0", "==5.12.1"),
        ("tokenizers", ">=0.23.1", "==0.22.2"),
    ]
    assert [(p["name"], p["specifier"]) for p in pins(None, "gb300-lowlat")] == [("torchcodec", "==0.17.0")]


def test_plan_shows_what_comes_from_the_release_and_what_the_derived_image_adds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "gb300-lowlat"]) == 0
    out = capsys.readouterr().out
    assert "image    v0.5.23 on linux/arm64: torch==2.14.1 (sglang 0.5.23 wheel METADATA on PyPI)" in out
    assert "transformers==5.19.0   from the release" in out
    assert "torchcodec==0.17.0     added by the derived image: the release leaves torchcodec out" in out
    assert main(["plan", "mi355x-agentx", "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert "AMD's torch" in view["image_packages"]["video"]


def test_a_wheel_fits_a_platform_by_its_tag() -> None:
    assert fits("torchcodec-0.17.0-cp312-cp312-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl", "arm64")
    assert not fits("torchcodec-0.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", "arm64")
    assert fits("torchcodec-0.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", "x86_64")
    assert not fits("torchcodec-0.9.1-cp312-cp312-macosx_11_0_arm64.whl", "arm64")  # arm64, but not linux
    assert fits("transformers-5.19.0-py3-none-any.whl", "arm64")
    assert not fits("torchcodec-0.9.1.tar.gz", "x86_64")  # an sdist is a build, not a wheel


def test_lock_refuses_a_pin_with_no_wheel_for_the_nodes_naming_the_nearest_that_have_one(
    tmp_path: Path,
) -> None:
    # an index holding only x86_64 wheels of the pin, and aarch64 wheels of the versions around it
    for name in (
        "torchcodec-0.9.1-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torchcodec-0.9.1-cp312-cp312-macosx_11_0_arm64.whl",
        "torchcodec-0.8.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        "torchcodec-0.11.0-cp312-cp312-manylinux_2_28_aarch64.whl",
    ):
        (tmp_path / name).write_bytes(name.encode())
    with pytest.raises(PackageIndexError) as err:
        resolve_package("torchcodec", "==0.9.1", find_links=str(tmp_path), platform="arm64")
    assert str(err.value) == (
        f"torchcodec==0.9.1: {tmp_path} has no linux arm64 wheel of 0.9.1 (nearest with one: 0.8.0, 0.11.0)"
    )
    # the x86_64 nodes' lock of the same pin resolves
    assert (
        resolve_package("torchcodec", "==0.9.1", find_links=str(tmp_path), platform="x86_64").version
        == "0.9.1"
    )


def test_validate_refuses_a_lock_whose_pin_has_no_wheel_for_the_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _stack(tmp_path)
    repo = LockedRepo(
        revision="main", commit="c" * 40, files={"config.json": LockedFile(size=2, git_oid="d" * 40)}
    )
    x86_only = LockedPackage.model_validate(
        {
            "version": "0.17.0",
            "files": {"torchcodec-0.17.0-cp312-cp312-manylinux_2_28_x86_64.whl": {"sha256": "a" * 64}},
        }
    )
    lock = StackLock(
        stack="gb300-lowlat", locked_on="2026-12-07", weights={"m/m": repo}, packages={"torchcodec": x86_only}
    )
    (folder / "gb300-lowlat.lock.yaml").write_text(dump_lock(lock))
    assert main(["validate", "gb300-lowlat", "--stacks-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "gb300-lowlat.lock.yaml packages.torchcodec: 0.17.0 has no linux arm64 wheel" in err
