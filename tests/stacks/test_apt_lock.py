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
from hosts.aptindex import AptIndex, Deb, existing_spec

from flashfleet.apt_index import AptIndexError, NoIndex, resolve
from flashfleet.catalog import node_packages
from flashfleet.cli import main
from flashfleet.cli.lock import resolve_apt
from flashfleet.planning import load_stack
from flashfleet.planning.apt_packages import (
    CODENAMES,
    CUDA_DISTROS,
    CUDA_REPO_URL,
    AptWant,
    RepoDir,
    locked_wants,
    node_apt,
    role_locks,
)
from flashfleet.stack import DEFAULT_STACKS_DIR
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


CUDA = "cuda/repos/ubuntu2404/x86_64"


@pytest.fixture
def repo() -> Iterator[AptIndex]:
    index = AptIndex(dirs={CUDA: list(DRIVER)}).start()
    yield index
    index.stop()


def test_the_pin_takes_its_version_and_the_repository_s_dependencies_follow(repo: AptIndex) -> None:
    url = f"{repo.root}/{CUDA}/"
    pins = {"nvidia-driver-595-open": "595.91.07-*", "nvidia-fabricmanager-595": "595.91.07-*"}
    assert list(resolve([url], list(pins), pins)) == [url]
    locked = resolve([url], list(pins), pins)[url]
    assert {n: d.version for n, d in locked.items()} == {
        "nvidia-driver-595-open": V,  # not the newer one the repository also holds
        "libnvidia-compute-595": V,  # its exact relation
        # no pin and only >= 595: the newest the repository has (apt's choice without a pin)
        "libnvidia-common-595": NEWER,
        "nvidia-kernel-dkms-595": V,  # the alternative the repository holds; libc6 is the distribution's
        "nvidia-fabricmanager-595": V,
    }
    assert locked["nvidia-driver-595-open"] == LockedDeb(
        version=V, sha256=repo.sha256(CUDA, "nvidia-driver-595-open", V), size=len(DRIVER[0].data()),
    )  # fmt: skip
    # a compressed index reads the same
    repo.gzipped = True
    assert resolve([url], ["nvidia-driver-595-open"], pins)[url]["libnvidia-compute-595"].version == V
    assert repo.requests[-1] == f"/{CUDA}/Packages.gz"


def test_directories_read_together_resolve_across_them_each_package_by_the_one_holding_it() -> None:
    """AMD's two repositories: ROCm depends on a library only amdgpu's holds; the newest of a package
    both hold wins, as apt picks it among sources of one priority."""
    amdgpu, rocm = (
        "amdgpu/30.10.2/ubuntu/dists/noble/main/binary-amd64",
        "rocm/apt/7.0.2/dists/noble/main/binary-amd64",
    )
    index = AptIndex(dirs={
        amdgpu: [Deb("amdgpu-dkms", "1:6.14-1"), Deb("libdrm-amdgpu-common", "1.0-1"), Deb("shared", "2.0-1")],
        rocm: [Deb("rocm", "7.0.2-56", "amd-smi-lib"), Deb("amd-smi-lib", "7.0.2-56", "libdrm-amdgpu-common, shared"),
               Deb("shared", "1.0-1")],
    }).start()  # fmt: skip
    try:
        urls = [f"{index.root}/{amdgpu}/", f"{index.root}/{rocm}/"]
        locked = resolve(urls, ["amdgpu-dkms", "rocm"])
        assert {u: {n: d.version for n, d in debs.items()} for u, debs in locked.items()} == {
            urls[0]: {"amdgpu-dkms": "1:6.14-1", "libdrm-amdgpu-common": "1.0-1", "shared": "2.0-1"},
            urls[1]: {"amd-smi-lib": "7.0.2-56", "rocm": "7.0.2-56"},
        }
        # read alone, ROCm's directory would leave the library to the distribution and lock the older one
        alone = resolve(urls[1:], ["rocm"])[urls[1]]
        assert {n: d.version for n, d in alone.items()} == {
            "amd-smi-lib": "7.0.2-56",
            "rocm": "7.0.2-56",
            "shared": "1.0-1",
        }
    finally:
        index.stop()


def test_what_the_repository_lacks_is_named(repo: AptIndex) -> None:
    url = f"{repo.root}/{CUDA}/"
    with pytest.raises(AptIndexError, match=r"has no nvidia-imex-595 595\.91\.07-\*$"):
        resolve([url], ["nvidia-imex-595"], {"nvidia-imex-595": "595.91.07-*"})
    repo.dirs[CUDA] = [d for d in DRIVER if d.package != "libnvidia-compute-595" or d.version != V]
    with pytest.raises(AptIndexError, match=r"has no libnvidia-compute-595 \(= 595\.91\.07-1\)$"):
        resolve([url], ["nvidia-driver-595-open"], {"nvidia-driver-595-open": "595.91.07-*"})
    with pytest.raises(NoIndex, match="no Packages index"):
        resolve([f"{repo.url}/debian12/x86_64/"], ["nvidia-driver-595-open"])
    # the distributions the repository does not serve are left out; none served is an error
    wants = [_want(f"{repo.url}/{d}/x86_64/") for d in ("ubuntu2404", "debian12")]
    assert list(resolve_apt(wants)) == [f"{repo.url}/ubuntu2404/x86_64/"]
    with pytest.raises(AptIndexError, match=r"^NVIDIA driver: .*debian12"):
        resolve_apt(wants[1:])
    repo.stop()
    with pytest.raises(AptIndexError, match="URLError"):
        resolve([url], ["nvidia-driver-595-open"])


def _want(url: str) -> AptWant:
    base, _, path = url.rstrip("/").rpartition("/")
    base, _, distro = base.rpartition("/")
    return AptWant(
        role="nvidia_driver", label="NVIDIA driver", indexes=(RepoDir(base=base, path=f"{distro}/{path}/"),),
        install=("nvidia-fabricmanager-595",), pins=(),
    )  # fmt: skip


def _urls(wants: list[AptWant], role: str) -> list[str]:
    return [i.url for w in wants if w.role == role for i in w.indexes]


def test_which_directories_and_packages_each_stack_s_nodes_take() -> None:
    h200, gb300 = load_stack("h200-lowlat").spec, load_stack("gb300-lowlat").spec
    pkgs = node_packages()
    # an AWS node runs its DLAMI's distribution; GB300 is arm64 (NVIDIA's sbsa directory)
    [driver] = [w for w in node_apt(h200) if w.role == "nvidia_driver"]
    assert (driver.indexes[0].url, driver.install) == (
        f"{CUDA_REPO_URL}/ubuntu2404/x86_64/", ("nvidia-driver-595-open", "nvidia-fabricmanager-595"),
    )  # fmt: skip
    assert driver.globs() == dict.fromkeys(driver.install, "595.91.07-*")
    docker, toolkit = [w for w in node_apt(h200) if w.role == "container_runtime"]
    assert docker.indexes[0].url == f"{pkgs.docker_repo_url}/ubuntu/dists/noble/stable/binary-amd64/"
    assert (docker.install, docker.globs()) == (
        ("docker-ce", "docker-ce-cli", "containerd.io"),
        {"docker-ce": f"5:{pkgs.docker_version}-*", "docker-ce-cli": f"5:{pkgs.docker_version}-*"},
    )
    assert toolkit.indexes[0].url == f"{pkgs.toolkit_repo_url}/stable/deb/amd64/"
    assert toolkit.globs() == dict.fromkeys(pkgs.toolkit_packages, f"{pkgs.toolkit_version}-*")
    assert _urls(node_apt(gb300), "nvidia_driver") == [f"{CUDA_REPO_URL}/ubuntu2404/sbsa/"]
    assert _urls(node_apt(gb300), "container_runtime") == [
        f"{pkgs.docker_repo_url}/ubuntu/dists/noble/stable/binary-arm64/", f"{pkgs.toolkit_repo_url}/stable/deb/arm64/",
    ]  # fmt: skip
    # a router's own x86_64 instance beside arm64 GPU nodes: Docker for both architectures
    assert _urls(node_apt(gb300, router_arch="x86_64"), "container_runtime") == [
        f"{pkgs.docker_repo_url}/ubuntu/dists/noble/stable/binary-arm64/",
        f"{pkgs.docker_repo_url}/ubuntu/dists/noble/stable/binary-amd64/",
        f"{pkgs.toolkit_repo_url}/stable/deb/arm64/",
    ]
    # AMD existing hosts: no NVIDIA driver or toolkit; amdgpu and ROCm read together, Debian 12 from
    # the jammy suites (the same want as Ubuntu 22.04's); Kubernetes nodes bring their own
    amd = node_apt(load_stack("mi355x-lowlat").spec)
    assert {w.role for w in amd} == {"container_runtime", "rocm_driver"}
    assert [[i.url for i in w.indexes] for w in amd if w.role == "rocm_driver"] == [
        [f"{pkgs.amdgpu_repo_url}/{pkgs.amdgpu_version}/ubuntu/dists/{s}/main/binary-amd64/",
         f"{pkgs.rocm_repo_url}/{pkgs.rocm_version}/dists/{s}/main/binary-amd64/"] for s in ("jammy", "noble")
    ]  # fmt: skip
    assert len(_urls(amd, "container_runtime")) == 3  # Docker's ubuntu jammy and noble, debian bookworm
    assert node_apt(load_stack("mi355x-k8s").spec) == []
    # an existing host may run any distribution preflight accepts; role arguments move the repository
    # and version
    moved = node_apt(existing_spec("h200"), {"nvidia_driver_repo_url": "http://mirror.test/cuda/", "nvidia_driver_version": "595.99.01",
                                "container_runtime_docker_version": "29.9.9"})  # fmt: skip
    assert sorted(_urls(moved, "nvidia_driver")) == [
        f"http://mirror.test/cuda/{d}/x86_64/" for d in ("debian12", "ubuntu2204", "ubuntu2404")
    ]
    assert all(
        w.globs()["nvidia-driver-595-open"] == "595.99.01-*" for w in moved if w.role == "nvidia_driver"
    )
    assert {w.globs()["docker-ce"] for w in moved if w.label == "Docker Engine"} == {"5:29.9.9-*"}


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


def test_plan_and_lock_required_see_each_part_locked_only_at_the_pinned_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_stack("h200-lowlat").spec
    wants = node_apt(spec)
    [driver] = [w for w in wants if w.role == "nvidia_driver"]
    index = driver.indexes[0].url
    at = {"nvidia-driver-595-open": LockedDeb(version=V, sha256="a" * 64, size=1),
          "nvidia-fabricmanager-595": LockedDeb(version=V, sha256="b" * 64, size=1)}  # fmt: skip
    assert locked_wants(wants, _lock({index: at})) == {driver: [index]}
    assert locked_wants(wants, None) == {}
    assert locked_wants(wants, _lock({"http://elsewhere/": at})) == {}
    # the same layout below a mirror's URL (the stack's site section) is the same directory
    mirror = "http://mirror.test/cuda/ubuntu2404/x86_64/"
    assert locked_wants(wants, _lock({mirror: at})) == {driver: [mirror]}
    stale = {**at, "nvidia-fabricmanager-595": LockedDeb(version=NEWER, sha256="b" * 64, size=1)}
    assert locked_wants(wants, _lock({index: stale})) == {}  # the catalog's version moved since
    partial = {"nvidia-driver-595-open": at["nvidia-driver-595-open"]}
    assert locked_wants(wants, _lock({index: partial})) == {}
    # what the inventory hands each role: its directories whatever they hold (a stale lock stops the
    # node, naming it), and nothing of a role the lock does not hold
    assert role_locks(wants, {index: stale, "http://elsewhere/": at}) == {"nvidia_driver": {index: stale}}

    # `plan` names each part, and a lock without it is not repeatable
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml", tmp_path)
    (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(_lock({index: partial})))
    view = _plan(tmp_path, capsys)
    parts = {p["name"].split(" (apt)")[0]: p for p in view["lock"]["parts"] if " (apt)" in p["name"]}
    assert (
        parts["NVIDIA driver"]["name"]
        == "NVIDIA driver (apt): nvidia-driver-595-open, nvidia-fabricmanager-595"
    )
    assert {name: p["state"] for name, p in parts.items()} == {
        "NVIDIA driver": "floating", "Docker Engine": "floating", "NVIDIA container toolkit": "floating",
        "system libraries the vendors' packages depend on": "floating",
        "ffmpeg in the derived image": "floating",
    }  # fmt: skip
    [warning] = [w for w in view["warnings"] if "does not pin" in w]
    assert "the NVIDIA driver's apt packages" in warning
    assert "the Docker Engine's apt packages" in warning
    (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(_lock({index: at})))
    view = _plan(tmp_path, capsys)
    parts = {p["name"].split(" (apt)")[0]: p for p in view["lock"]["parts"] if " (apt)" in p["name"]}
    assert (parts["NVIDIA driver"]["state"], parts["NVIDIA driver"]["pinned"]) == ("locked", V)
    assert "2 packages as of 2026-12-06 for ubuntu2404/x86_64" in parts["NVIDIA driver"]["detail"]
    assert parts["Docker Engine"]["state"] == "floating"
    [warning] = [w for w in view["warnings"] if "does not pin" in w]
    assert "NVIDIA driver" not in warning
    assert "the Docker Engine's apt packages" in warning


def test_a_version_the_stack_s_site_names_is_the_one_the_lock_must_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`flashfleet lock` resolves with the stack's site section; `plan` and `lock: required` judge
    the lock by it too (a site that runs another Docker release, locked, is locked)."""
    import copy

    import yaml

    catalog = yaml.safe_load((DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml").read_text())
    doc = copy.deepcopy(catalog)
    doc["config"]["flashfleet:stack"]["site"] = {"apt": {"dockerVersion": "29.9.9"}}
    (tmp_path / "Pulumi.h200-lowlat.yaml").write_text(yaml.safe_dump(doc))
    [docker] = [w for w in node_apt(load_stack("h200-lowlat").spec) if w.label == "Docker Engine"]
    deb = LockedDeb(version="5:29.9.9-1~ubuntu.24.04~noble", sha256="a" * 64, size=1)
    held = {"docker-ce": deb, "docker-ce-cli": deb, "containerd.io": deb}
    (tmp_path / "h200-lowlat.lock.yaml").write_text(dump_lock(_lock({docker.indexes[0].url: held})))
    parts = {p["name"].split(" (apt)")[0]: p for p in _plan(tmp_path, capsys)["lock"]["parts"]}
    assert (parts["Docker Engine"]["state"], parts["Docker Engine"]["pinned"]) == ("locked", deb.version)
    assert (
        "3 packages as of 2026-12-06 for ubuntu/dists/noble/stable/binary-amd64 "
        in parts["Docker Engine"]["detail"]
    )
    # the catalog's version without the site's: the same lock pins another release
    (tmp_path / "Pulumi.h200-lowlat.yaml").write_text(yaml.safe_dump(catalog))
    parts = {p["name"].split(" (apt)")[0]: p for p in _plan(tmp_path, capsys)["lock"]["parts"]}
    assert parts["Docker Engine"]["state"] == "floating"


def _plan(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", "h200-lowlat", "--stacks-dir", str(folder), "--format", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def _role_value(role: str, name: str, facts: dict[str, str]) -> Any:
    """A role's variable as Ansible templates it on a node with these facts, from its own defaults
    and vars."""
    import yaml
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from flashfleet.bringup.project import REPO

    def trusted(value: Any) -> Any:  # a role's own files are templates Ansible trusts
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, list):
            return [trusted(v) for v in value]
        return {k: trusted(v) for k, v in value.items()} if isinstance(value, dict) else value

    variables: dict[str, Any] = {}
    for part in ("defaults", "vars"):
        variables |= trusted(yaml.safe_load((REPO / f"roles/{role}/{part}/main.yml").read_text()))
    variables["ansible_facts"] = facts
    return Templar(loader=DataLoader(), variables=variables).template(variables[name])


FACTS = {  # ansible_facts of each distribution preflight accepts, on each architecture
    (distro, arch): {"distribution": name.capitalize(), "distribution_version": version,
                     "distribution_major_version": version.split(".")[0], "distribution_release": codename,
                     "architecture": {"x86_64": "x86_64", "arm64": "aarch64"}[arch]}
    for distro, (name, codename) in CODENAMES.items()
    for version in [distro.split("-")[1]]
    for arch in ("x86_64", "arm64")
}  # fmt: skip


def test_the_directories_are_the_ones_each_role_names_for_the_distributions_preflight_accepts() -> None:
    """Each role builds its directories from its own default URLs and versions and the node's facts
    (roles/*/vars/main.yml); the lock resolves the same ones, and the versions are the catalog's."""
    import yaml

    from flashfleet.bringup.project import REPO

    supported = yaml.safe_load((REPO / "roles/preflight/vars/main.yml").read_text())[
        "_preflight_supported_os"
    ]
    accepted = {f"{os.lower()}-{version}" for os, versions in supported.items() for version in versions}
    assert accepted == set(CUDA_DISTROS) == set(CODENAMES)
    pkgs = node_packages()
    defaults = {
        role: yaml.safe_load((REPO / f"roles/{role}/defaults/main.yml").read_text())
        for role in ("nvidia_driver", "container_runtime", "rocm_driver")
    }
    assert defaults["nvidia_driver"]["nvidia_driver_repo_url"] == CUDA_REPO_URL
    assert {k: defaults["container_runtime"][f"container_runtime_{k}"] for k in (
        "docker_version", "docker_repo_url", "nvidia_toolkit_version", "nvidia_repo_url")} == {
        "docker_version": pkgs.docker_version, "docker_repo_url": pkgs.docker_repo_url,
        "nvidia_toolkit_version": pkgs.toolkit_version, "nvidia_repo_url": pkgs.toolkit_repo_url,
    }  # fmt: skip
    assert {k: defaults["rocm_driver"][f"rocm_driver_{k}"] for k in (
        "amdgpu_version", "rocm_version", "amdgpu_repo_url", "rocm_repo_url")} == {
        "amdgpu_version": pkgs.amdgpu_version, "rocm_version": pkgs.rocm_version,
        "amdgpu_repo_url": pkgs.amdgpu_repo_url, "rocm_repo_url": pkgs.rocm_repo_url,
    }  # fmt: skip
    assert list(pkgs.toolkit_packages) == _role_value(
        "container_runtime", "_container_runtime_nvidia_packages", {}
    )
    for (_, arch), facts in FACTS.items():
        nvidia = node_apt(existing_spec("gb300" if arch == "arm64" else "h200"))
        driver = [w.indexes[0].url for w in nvidia if w.role == "nvidia_driver"]
        assert _role_value("nvidia_driver", "_nvidia_driver_repo", facts).strip() in driver
        runtime = [w.indexes[0].url for w in nvidia if w.role == "container_runtime"]
        assert _role_value("container_runtime", "_container_runtime_docker_index", facts).strip() in runtime
        assert _role_value("container_runtime", "_container_runtime_nvidia_index", facts) in runtime
        if arch == "x86_64":
            rocm = [
                [i.url for i in w.indexes]
                for w in node_apt(existing_spec("mi355x"))
                if w.role == "rocm_driver"
            ]
            assert _role_value("rocm_driver", "_rocm_driver_indexes", facts) in rocm
