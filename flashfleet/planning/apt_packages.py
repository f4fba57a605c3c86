"""What the NVIDIA driver role apt-installs on a stack's nodes, decided once: for each repository
directory the nodes' sources may name (NVIDIA's CUDA repository, one directory per distribution and
architecture: <repo>/<distribution><version>/<x86_64|sbsa>/), the packages the role installs and
the version glob its apt preferences pin them to. `flashfleet lock` resolves these in each
directory (flashfleet.apt_index); the inventory hands the NVIDIA nodes the lock's entries and the
role checks what apt would install against the entry of its own directory; `plan` says which are
locked.

The distributions: an AWS node runs its DLAMI's (the stack's dlamiOs); an existing host may run any
the preflight role accepts, so each is resolved. A Kubernetes cluster's nodes bring their own
driver: nothing is installed there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flashfleet.catalog import hardware_catalog
from flashfleet.stack.lock import StackLock
from flashfleet.stack.spec import StackSpec

# roles/nvidia_driver/defaults/main.yml's nvidia_driver_repo_url, and the role's layout of it
# (tests/stacks/test_apt_lock.py checks they agree)
CUDA_REPO_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
# the distributions roles/preflight accepts -> the CUDA repository's directory for each
CUDA_DISTROS = {"ubuntu-22.04": "ubuntu2204", "ubuntu-24.04": "ubuntu2404", "debian-12": "debian12"}
CUDA_ARCH = {"x86_64": "x86_64", "arm64": "sbsa"}


def driver_apt(spec: StackSpec, role_vars: Mapping[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """Repository directory URL -> {package: version glob} of the NVIDIA driver role on the
    stack's nodes (empty: it installs nothing from apt there). roleVars that move the role's
    arguments (its repository, branch, version, kernel modules) move these too."""
    rv = dict(role_vars or {})
    hw = hardware_catalog()[spec.hardware]
    source = spec.nodes.source
    if hw.driver is None or source.kind == "kubernetes":
        return {}
    driver = hw.driver
    branch = str(rv.get("nvidia_driver_branch", driver.branch))
    version = str(rv.get("nvidia_driver_version", driver.version))
    is_open = bool(rv.get("nvidia_driver_open_kernel_modules", driver.open_kernel_modules))
    glob = f"{version}-*"  # the role's Pin: version in /etc/apt/preferences.d/nvidia-driver.pref
    pins = {f"nvidia-driver-{branch}{'-open' if is_open else ''}": glob}
    if rv.get("nvidia_driver_fabricmanager", driver.fabricmanager):
        pins[f"nvidia-fabricmanager-{branch}"] = glob
    if rv.get("nvidia_driver_imex", driver.imex):
        pins[f"nvidia-imex-{branch}"] = glob
    base = str(rv.get("nvidia_driver_repo_url") or CUDA_REPO_URL).rstrip("/")
    distros = [source.dlami_os] if source.kind == "aws" else list(CUDA_DISTROS)
    return {f"{base}/{CUDA_DISTROS[d]}/{CUDA_ARCH[hw.arch]}/": pins for d in distros}


def where(index: str) -> str:
    """A repository directory by its distribution and architecture (``ubuntu2404/x86_64``)."""
    return "/".join(index.rstrip("/").split("/")[-2:])


def locked_dirs(spec: StackSpec, lock: StackLock | None) -> list[str]:
    """The lock's repository directories that serve a directory of the driver (driver_apt: the
    same distribution and architecture, from NVIDIA or the mirror the stack's roleVars name), each
    with every package the pins name at a version its glob allows."""
    import fnmatch

    wanted = {where(index): pins for index, pins in driver_apt(spec).items()}
    held = lock.apt if lock is not None else {}
    return [
        index for index, debs in held.items()
        if (pins := wanted.get(where(index))) is not None
        and all(p in debs and fnmatch.fnmatchcase(debs[p].version, glob) for p, glob in pins.items())
    ]  # fmt: skip
