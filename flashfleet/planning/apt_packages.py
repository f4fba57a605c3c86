"""What the roles apt-install on a stack's nodes from vendors' repositories, decided once: for each
role, distribution and architecture the nodes may run, the repository directories apt reads (each
holds a Packages index: a flat repository's own directory, or a suite's
``dists/<suite>/<component>/binary-<arch>/``), the packages the role asks for, and the version glob
its apt preferences pin each to.

- nvidia_driver (NVIDIA GPU nodes): the driver, and the fabric manager (H200) or IMEX (GB300), from
  NVIDIA's CUDA repository (one flat directory per distribution and architecture);
- container_runtime (every node): Docker Engine from Docker's repository, and on NVIDIA GPU nodes
  the NVIDIA container toolkit from its flat repository;
- rocm_driver (AMD GPU nodes): amdgpu-dkms and ROCm from AMD's two repositories, read together (ROCm
  depends on amdgpu's libraries).

`flashfleet lock` resolves each in its directories (flashfleet.apt_index); the inventory hands each
role the lock's entries of its directories, and the role checks what apt would install against the
entries of its own (roles/apt_lock); `plan` says which are locked.

The distributions: an AWS node runs its DLAMI's (the stack's dlamiOs; a router's own instance the
same Ubuntu); an existing host may run any the preflight role accepts, so each is resolved. A
Kubernetes cluster's nodes bring their own: nothing is installed there.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from flashfleet.catalog import hardware_catalog, node_packages
from flashfleet.stack.lock import LockedDeb, StackLock
from flashfleet.stack.spec import StackSpec

Role = Literal["nvidia_driver", "container_runtime", "rocm_driver"]

# roles/nvidia_driver/defaults/main.yml's nvidia_driver_repo_url, and the role's layout of it
# (tests/stacks/test_apt_lock.py checks they agree)
CUDA_REPO_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
# the distributions roles/preflight accepts -> the CUDA repository's directory for each
CUDA_DISTROS = {"ubuntu-22.04": "ubuntu2204", "ubuntu-24.04": "ubuntu2404", "debian-12": "debian12"}
CUDA_ARCH = {"x86_64": "x86_64", "arm64": "sbsa"}
# the same distributions as apt names them: (distribution, codename)
CODENAMES = {
    "ubuntu-22.04": ("ubuntu", "jammy"),
    "ubuntu-24.04": ("ubuntu", "noble"),
    "debian-12": ("debian", "bookworm"),
}
DEB_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
# AMD publishes Ubuntu suites; Debian 12 takes jammy's (roles/rocm_driver/vars/main.yml)
ROCM_SUITES = {"jammy": "jammy", "noble": "noble", "bookworm": "jammy"}


class RepoDir(BaseModel):
    """One repository directory holding a Packages index: ``base`` (the repository URL a role's
    argument names, a mirror's included) and ``path`` below it, the layout the role derives from the
    node's distribution and architecture."""

    model_config = ConfigDict(frozen=True)

    base: str
    path: str

    @property
    def url(self) -> str:
        return f"{self.base.rstrip('/')}/{self.path}"


class AptWant(BaseModel):
    """What one role asks apt for on one distribution and architecture."""

    model_config = ConfigDict(frozen=True)

    role: Role
    label: str  # what plan calls it
    indexes: tuple[RepoDir, ...]  # read together: a dependency may come from any of them
    install: tuple[str, ...]  # what the role asks apt for
    pins: tuple[tuple[str, str], ...]  # package -> the version glob its apt preferences pin

    def globs(self) -> dict[str, str]:
        return dict(self.pins)


def _driver(spec: StackSpec, rv: Mapping[str, Any], distros: list[str]) -> list[AptWant]:
    hw = hardware_catalog()[spec.hardware]
    if hw.driver is None:
        return []
    driver = hw.driver
    branch = str(rv.get("nvidia_driver_branch", driver.branch))
    version = str(rv.get("nvidia_driver_version", driver.version))
    is_open = bool(rv.get("nvidia_driver_open_kernel_modules", driver.open_kernel_modules))
    glob = f"{version}-*"  # the role's Pin: version in /etc/apt/preferences.d/nvidia-driver.pref
    install = [f"nvidia-driver-{branch}{'-open' if is_open else ''}"]
    if rv.get("nvidia_driver_fabricmanager", driver.fabricmanager):
        install.append(f"nvidia-fabricmanager-{branch}")
    if rv.get("nvidia_driver_imex", driver.imex):
        install.append(f"nvidia-imex-{branch}")
    base = str(rv.get("nvidia_driver_repo_url") or CUDA_REPO_URL)
    return [
        AptWant(
            role="nvidia_driver", label="NVIDIA driver", install=tuple(install),
            indexes=(RepoDir(base=base, path=f"{CUDA_DISTROS[d]}/{CUDA_ARCH[hw.arch]}/"),),
            pins=tuple((name, glob) for name in install),
        )
        for d in distros
    ]  # fmt: skip


def _docker(rv: Mapping[str, Any], distro: str, arch: str) -> AptWant:
    pkgs = node_packages()
    version = str(rv.get("container_runtime_docker_version", pkgs.docker_version))
    base = str(rv.get("container_runtime_docker_repo_url") or pkgs.docker_repo_url)
    name, codename = CODENAMES[distro]
    glob = f"5:{version}-*"  # roles/container_runtime/templates/docker.pref.j2
    return AptWant(
        role="container_runtime", label="Docker Engine",
        indexes=(RepoDir(base=base, path=f"{name}/dists/{codename}/stable/binary-{DEB_ARCH[arch]}/"),),
        install=("docker-ce", "docker-ce-cli", "containerd.io"),
        pins=(("docker-ce", glob), ("docker-ce-cli", glob)),
    )  # fmt: skip


def _toolkit(rv: Mapping[str, Any], arch: str) -> AptWant:
    pkgs = node_packages()
    version = str(rv.get("container_runtime_nvidia_toolkit_version", pkgs.toolkit_version))
    base = str(rv.get("container_runtime_nvidia_repo_url") or pkgs.toolkit_repo_url)
    return AptWant(
        role="container_runtime", label="NVIDIA container toolkit",
        indexes=(RepoDir(base=base, path=f"stable/deb/{DEB_ARCH[arch]}/"),),
        install=("nvidia-container-toolkit",),
        pins=tuple((name, f"{version}-*") for name in pkgs.toolkit_packages),
    )  # fmt: skip


def _rocm(rv: Mapping[str, Any], distro: str) -> AptWant:
    pkgs = node_packages()
    amdgpu = str(rv.get("rocm_driver_amdgpu_version", pkgs.amdgpu_version))
    rocm = str(rv.get("rocm_driver_rocm_version", pkgs.rocm_version))
    suite = ROCM_SUITES[CODENAMES[distro][1]]
    install = ("amdgpu-dkms", "rocm") if rv.get("rocm_driver_install_rocm", True) else ("amdgpu-dkms",)
    indexes = (
        RepoDir(base=str(rv.get("rocm_driver_amdgpu_repo_url") or pkgs.amdgpu_repo_url),
                 path=f"{amdgpu}/ubuntu/dists/{suite}/main/binary-amd64/"),
        RepoDir(base=str(rv.get("rocm_driver_rocm_repo_url") or pkgs.rocm_repo_url),
                 path=f"{rocm}/dists/{suite}/main/binary-amd64/"),
    )  # fmt: skip
    # AMD's pin prefers repo.radeon.com by origin, not by version: each release has its directory
    return AptWant(role="rocm_driver", label="AMD driver and ROCm", indexes=indexes, install=install, pins=())


def node_apt(
    spec: StackSpec, site_args: Mapping[str, Any] | None = None, router_arch: str | None = None
) -> list[AptWant]:
    """Every role's apt wants on the stack's nodes (none on Kubernetes), one per distribution and
    architecture the nodes may run, without repeats. The site section's arguments that move a
    role's repository or Docker release move these too. ``router_arch``: a router's own AWS instance's."""
    rv = dict(site_args or {})
    hw = hardware_catalog()[spec.hardware]
    source = spec.nodes.source
    if source.kind == "kubernetes":
        return []
    distros: list[str] = [source.dlami_os] if source.kind == "aws" else list(CUDA_DISTROS)
    wants = _driver(spec, rv, distros) if hw.vendor == "nvidia" else []
    for arch in dict.fromkeys([hw.arch, router_arch or hw.arch]):
        wants += [_docker(rv, d, arch) for d in distros]
    if hw.vendor == "nvidia":
        wants.append(_toolkit(rv, hw.arch))
    elif hw.vendor == "amd":
        wants += [_rocm(rv, d) for d in distros]
    return list(dict.fromkeys(wants))


def where(index: str) -> str:
    """A repository directory by the layout below its repository (``ubuntu2404/x86_64``,
    ``debian/dists/bookworm/stable/binary-amd64``): its last parts."""
    parts = index.rstrip("/").split("/")
    if "dists" not in parts:
        return "/".join(parts[-2:])
    return "/".join(parts[len(parts) - 1 - parts[::-1].index("dists") - 1 :])


def _held(index: RepoDir, held: Mapping[str, Mapping[str, LockedDeb]]) -> str | None:
    """The lock's directory for this one: the same URL, else the same layout below another
    repository URL (a mirror the stack's site section names)."""
    if index.url in held:
        return index.url
    return next((url for url in held if url.rstrip("/").endswith("/" + index.path.rstrip("/"))), None)


def locked_wants(wants: list[AptWant], lock: StackLock | None) -> dict[AptWant, list[str]]:
    """The wants the lock holds, each with the lock's directories for it: every directory there,
    and every package the want installs and pins there at a version its glob allows."""
    held = lock.apt if lock is not None else {}
    out: dict[AptWant, list[str]] = {}
    for want in wants:
        dirs = [_held(index, held) for index in want.indexes]
        if any(d is None for d in dirs):
            continue
        debs = {name: deb for d in dirs if d is not None for name, deb in held[d].items()}
        globs = want.globs()
        if all(
            name in debs and fnmatch.fnmatchcase(debs[name].version, globs.get(name, "*"))
            for name in dict.fromkeys([*want.install, *(n for n in globs if n in debs)])
        ):
            out[want] = [d for d in dirs if d is not None]
    return out


def unlocked(wants: list[AptWant], lock: StackLock | None) -> list[str]:
    """The parts (a want's label) the lock holds for no distribution: a distribution the vendor
    does not serve is left out of a lock, a part it serves none of is not locked."""
    locked = {want.label for want in locked_wants(wants, lock)}
    return [label for label in dict.fromkeys(w.label for w in wants) if label not in locked]


def role_locks(
    wants: list[AptWant], held: Mapping[str, dict[str, LockedDeb]]
) -> dict[str, dict[str, dict[str, LockedDeb]]]:
    """What the inventory hands each role: the lock's entries of the directories its wants name, by
    role, whatever versions they hold (a lock older than the catalog's versions stops the node,
    naming them). A role the lock holds no directory of is left out: it installs unlocked. `held`:
    the lock's apt part."""
    out: dict[str, dict[str, dict[str, LockedDeb]]] = {}
    for want in wants:
        for index in want.indexes:
            if (d := _held(index, held)) is not None:
                out.setdefault(want.role, {})[d] = held[d]
    return out
