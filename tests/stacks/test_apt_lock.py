"""The NVIDIA driver's apt packages in a stack's lock: which repository directories and packages a
stack's driver takes (flashfleet.planning.apt_packages), what a repository's index resolves them to
(flashfleet.apt_index, against a stand-in repository on loopback: tests/hosts/aptindex.py), how the
lock carries them, and what `plan` and `lock: required` say. `flashfleet lock` writing them is
tests/cli/test_lock_cli.py's; a node checking apt against them, tests/roles/test_nvidia_driver.py's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosts.aptindex import AptIndex, Deb

from flashfleet.apt_index import AptIndexError, NoIndex, resolve
from flashfleet.cli import main
from flashfleet.cli.lock import resolve_apt
from flashfleet.planning import load_stack, parse_spec
from flashfleet.planning.apt_packages import CUDA_ARCH, CUDA_DISTROS, CUDA_REPO_URL, driver_apt, locked_dirs
from flashfleet.stack import DEFAULT_STACKS_DIR, read_stack_file
from flashfleet.stack.lock import LockedDeb, StackLock, dump_lock, read_lock

V, NEWER = "595.91.07-1", "595.99.01-1"
DRIVER = [
    Deb("nvidia-driver-595-open", V, "libnvidia-compute-595 (= 595.91.07-1), nvidia-kernel-source-595-open | "
        "nvidia-kernel-dkms-595, libc6 (>= 2.34)"),
    Deb("nvidia-driver-595-open", NEWER, "libnvidia-compute-595 (= 595.99.01-1)"),
    Deb("libnvidia-compute-595", V, "libnvidia-common-595 (>= 595)"),
    Deb("libnvidia-compute-595", NEWER),
    Deb("libnvidia-common-595", V),
    Deb("libnvidia-common-595", NEWER),
    Deb("nvidia-kernel-dkms-595", V),  # the repository holds only the second alternative
    Deb("nvidia-fabricmanager-595", V),
    Deb("nvidia-fabricmanager-595", NEWER),
]  # fmt: skip


@pytest.fixture
def repo() -> Iterator[AptIndex]:
    index = AptIndex(dirs={"ubuntu2404/x86_64": list(DRIVER)}).start()
    yield index
    index.stop()


def test_the_pin_takes_its_version_and_the_repository_s_dependencies_follow(repo: AptIndex) -> None:
    url = f"{repo.url}/ubuntu2404/x86_64/"
    locked = resolve(
        url, {"nvidia-driver-595-open": "595.91.07-*", "nvidia-fabricmanager-595": "595.91.07-*"}
    )
    assert {n: d.version for n, d in locked.items()} == {
        "nvidia-driver-595-open": V,  # not the newer one the repository also holds
        "libnvidia-compute-595": V,  # its exact relation
        # no pin and only >= 595: the newest the repository has (apt's choice without a pin)
        "libnvidia-common-595": NEWER,
        "nvidia-kernel-dkms-595": V,  # the alternative the repository holds; libc6 is the distribution's
        "nvidia-fabricmanager-595": V,
    }
    assert locked["nvidia-driver-595-open"] == LockedDeb(
        version=V, sha256=repo.sha256("ubuntu2404/x86_64", "nvidia-driver-595-open", V),
        size=len(DRIVER[0].data()),
    )  # fmt: skip
    # a compressed index reads the same
    repo.gzipped = True
    assert resolve(url, {"nvidia-driver-595-open": "595.91.07-*"})["libnvidia-compute-595"].version == V
    assert repo.requests[-1] == "/cuda/repos/ubuntu2404/x86_64/Packages.gz"


def test_what_the_repository_lacks_is_named(repo: AptIndex) -> None:
    url = f"{repo.url}/ubuntu2404/x86_64/"
    with pytest.raises(AptIndexError, match=r"has no nvidia-imex-595 595\.91\.07-\*$"):
        resolve(url, {"nvidia-imex-595": "595.91.07-*"})
    repo.dirs["ubuntu2404/x86_64"] = [
        d for d in DRIVER if d.package != "libnvidia-compute-595" or d.version != V
    ]
    with pytest.raises(AptIndexError, match=r"has no libnvidia-compute-595 \(= 595\.91\.07-1\)$"):
        resolve(url, {"nvidia-driver-595-open": "595.91.07-*"})
    with pytest.raises(NoIndex, match="no Packages index"):
        resolve(f"{repo.url}/debian12/x86_64/", {"nvidia-driver-595-open": "595.91.07-*"})
    # the distributions the repository does not serve are left out; none served is an error
    wanted = {
        f"{repo.url}/{d}/x86_64/": {"nvidia-fabricmanager-595": "*"} for d in ("ubuntu2404", "debian12")
    }
    assert list(resolve_apt(wanted)) == [f"{repo.url}/ubuntu2404/x86_64/"]
    with pytest.raises(AptIndexError, match="debian12"):
        resolve_apt({f"{repo.url}/debian12/x86_64/": {"nvidia-fabricmanager-595": "*"}})
    repo.stop()
    with pytest.raises(AptIndexError, match="URLError"):
        resolve(url, {"nvidia-driver-595-open": "*"})


def test_which_directories_and_packages_each_stack_s_driver_takes() -> None:
    h200, gb300 = load_stack("h200-lowlat").spec, load_stack("gb300-lowlat").spec
    # an AWS node runs its DLAMI's distribution; GB300 is arm64 (NVIDIA's sbsa directory)
    assert driver_apt(h200) == {
        f"{CUDA_REPO_URL}/ubuntu2404/x86_64/": {
            "nvidia-driver-595-open": "595.91.07-*", "nvidia-fabricmanager-595": "595.91.07-*",
        },
    }  # fmt: skip
    assert driver_apt(gb300) == {
        f"{CUDA_REPO_URL}/ubuntu2404/sbsa/": {
            "nvidia-driver-595-open": "595.91.07-*",
            "nvidia-imex-595": "595.91.07-*",
        }
    }
    # AMD and Kubernetes nodes install no NVIDIA driver
    assert driver_apt(load_stack("mi355x-lowlat").spec) == {} == driver_apt(load_stack("mi355x-k8s").spec)
    # an existing host may run any distribution preflight accepts; roleVars move the repository and version
    sf = read_stack_file("h200-lowlat", DEFAULT_STACKS_DIR)
    data = dict(sf.spec_data)
    data["nodes"] = {"count": 1, "source": {"kind": "existing", "hosts": [
        {"address": "192.0.2.10", "sshUser": "ubuntu", "gpus": {"model": "h200", "count": 8}, "hostMemoryGib": 2048}]}}  # fmt: skip
    existing = parse_spec("h200-lowlat", data)
    moved = driver_apt(
        existing, {"nvidia_driver_repo_url": "http://mirror.test/cuda/", "nvidia_driver_version": "595.99.01"}
    )
    assert sorted(moved) == [
        f"http://mirror.test/cuda/{d}/x86_64/" for d in ("debian12", "ubuntu2204", "ubuntu2404")
    ]
    want = {"nvidia-driver-595-open": "595.99.01-*", "nvidia-fabricmanager-595": "595.99.01-*"}
    assert all(pins == want for pins in moved.values())


def _lock(apt: dict[str, dict[str, LockedDeb]]) -> StackLock:
    from flashfleet.stack.lock import LockedFile, LockedRepo

    repo = LockedRepo(
        revision="main", commit="c" * 40, files={"config.json": LockedFile(size=2, git_oid="d" * 40)}
    )
    return StackLock(stack="h200-lowlat", locked_on="2026-12-06", weights={"m/m": repo}, apt=apt)


def test_the_lock_carries_the_packages_and_a_lock_without_them_hashes_as_before(tmp_path: Path) -> None:
    index = f"{CUDA_REPO_URL}/ubuntu2404/x86_64/"
    deb = LockedDeb(version=V, sha256="a" * 64, size=10)
    lock = _lock({index: {"nvidia-fabricmanager-595": deb, "nvidia-driver-595-open": deb}})
    text = dump_lock(lock)
    assert f"  {index}:\n    nvidia-driver-595-open: {{sha256: {'a' * 64}, size: 10, version: {V}}}\n" in text
    path = tmp_path / "h200-lowlat.lock.yaml"
    path.write_text(text)
    assert read_lock(path) == lock
    bare = _lock({})
    assert "apt" not in dump_lock(bare)
    assert bare.digest != lock.digest
    # the digest of a lock that pins no apt package is what it was before apt was locked
    assert (
        bare.digest
        == StackLock.model_validate({k: v for k, v in bare.model_dump().items() if k != "apt"}).digest
    )
    path.write_text(text.replace("sha256: " + "a" * 64, "sha256: abc"))
    with pytest.raises(ValueError, match=r"apt\..*sha256: String should match pattern"):
        read_lock(path)


def test_plan_and_lock_required_see_the_driver_locked_only_at_the_pinned_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_stack("h200-lowlat").spec
    [index] = driver_apt(spec)
    at = {"nvidia-driver-595-open": LockedDeb(version=V, sha256="a" * 64, size=1),
          "nvidia-fabricmanager-595": LockedDeb(version=V, sha256="b" * 64, size=1)}  # fmt: skip
    assert locked_dirs(spec, _lock({index: at})) == [index]
    assert locked_dirs(spec, None) == []
    assert locked_dirs(spec, _lock({"http://elsewhere/": at})) == []
    stale = {**at, "nvidia-fabricmanager-595": LockedDeb(version=NEWER, sha256="b" * 64, size=1)}
    assert locked_dirs(spec, _lock({index: stale})) == []  # the catalog's version moved since
    partial = {"nvidia-driver-595-open": at["nvidia-driver-595-open"]}
    assert locked_dirs(spec, _lock({index: partial})) == []

    # `plan` names the part, and a lock without it is not repeatable
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml", tmp_path)
    (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(_lock({index: partial})))
    view = _plan(tmp_path, capsys)
    [part] = [p for p in view["lock"]["parts"] if p["name"].startswith("NVIDIA driver (apt)")]
    assert (part["name"], part["state"]) == (
        "NVIDIA driver (apt): nvidia-driver-595-open, nvidia-fabricmanager-595",
        "floating",
    )
    assert any("does not pin" in w and "the NVIDIA driver's apt packages" in w for w in view["warnings"])
    (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(_lock({index: at})))
    view = _plan(tmp_path, capsys)
    [part] = [p for p in view["lock"]["parts"] if p["name"].startswith("NVIDIA driver (apt)")]
    assert (part["state"], part["pinned"]) == ("locked", V)
    assert "2 packages as of 2026-12-06 for ubuntu2404/x86_64" in part["detail"]
    assert not any("NVIDIA driver" in w for w in view["warnings"])


def _plan(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(folder), "--format", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_directories_are_the_ones_the_role_names_for_the_distributions_preflight_accepts() -> None:
    """The role builds its directory from its own default URL and the node's distribution
    (roles/nvidia_driver/vars/main.yml); the lock resolves the same ones."""
    import yaml

    from flashfleet.bringup.project import REPO

    defaults = yaml.safe_load((REPO / "roles/nvidia_driver/defaults/main.yml").read_text())
    assert defaults["nvidia_driver_repo_url"] == CUDA_REPO_URL
    supported = yaml.safe_load((REPO / "roles/preflight/vars/main.yml").read_text())[
        "_preflight_supported_os"
    ]
    accepted = {f"{os.lower()}-{version}" for os, versions in supported.items() for version in versions}
    assert accepted == set(CUDA_DISTROS)
    role_vars = yaml.safe_load((REPO / "roles/nvidia_driver/vars/main.yml").read_text())
    assert role_vars["_nvidia_driver_repo_arch"] == {
        "x86_64": CUDA_ARCH["x86_64"],
        "aarch64": CUDA_ARCH["arm64"],
    }
