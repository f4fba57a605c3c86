"""What the nodes of a stack pip-install, decided once: each distribution, the specifier the stack
asks for it, which role installs it, and the index that role's pip reads (the stack's site section:
a mirror or a wheel folder, else PyPI). `flashfleet lock` resolves these on those indexes; the
inventory hands each role its own locked entries; `plan` says which are locked.

- what the derived image adds to its release (sglang_image: flashfleet/stack/image_packages.py),
  when the stack runs a derived image, and SMG where the stack's router is smg;
- the weights download client, huggingface_hub (model_weights on hosts, the download containers
  on Kubernetes), unless the weights are prestaged;
- the Mooncake wheel for the stack's transport (mooncake), on a stack with the L3 tier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from flashfleet.catalog import download_client, hardware_catalog, pip_packages
from flashfleet.stack.image_packages import image_packages, with_router
from flashfleet.stack.lock import LockedPackage, StackLock
from flashfleet.stack.spec import StackSpec

Installer = Literal["sglang_image", "model_weights", "mooncake"]


class PipInstall(BaseModel):
    """One distribution a node installs with pip, and where that pip looks for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # as pip installs it
    specifier: str  # ==5.17.0, >=0.23.1
    installer: Installer
    index_url: str | None = None  # None: PyPI (or whatever pip on the node is set up to read)
    find_links: str | None = None  # a wheel folder (URL, or a controller folder): read alone
    # the nodes' CPU architecture where only some wheels fit (the derived image's packages run
    # on the GPU nodes' platform); None: the package fits every node (pure Python, or every
    # platform's wheel is locked)
    platform: Literal["x86_64", "arm64"] | None = None

    def allows(self, locked: LockedPackage) -> bool:
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(self.specifier).contains(locked.version, prereleases=True)


def _requirement(text: str) -> tuple[str, str]:
    from packaging.requirements import Requirement

    req = Requirement(text)
    return req.name, str(req.specifier)


def pip_installs(spec: StackSpec, site_args: Mapping[str, Any] | None = None) -> dict[str, PipInstall]:
    """Every distribution the stack's nodes pip-install, by name."""
    rv = dict(site_args or {})
    out: dict[str, PipInstall] = {}
    catalog = pip_packages()
    if spec.image.derived:
        # only what the release lacks: the rest the base image ships, and the build leaves alone
        hw = hardware_catalog()[spec.hardware]
        held = with_router(
            image_packages(spec.image.version, hw, spec.image.packages), spec.router_program == "smg"
        )
        for pin in held.installs:
            out[pin.name] = PipInstall(
                name=pin.name, specifier=pin.specifier, installer="sglang_image", platform=hw.arch,
                index_url=rv.get("sglang_image_pip_index_url") or None,
                find_links=rv.get("sglang_image_pip_find_links") or None,
            )  # fmt: skip
    if not spec.weights.prestaged:
        out["huggingface_hub"] = PipInstall(
            name="huggingface_hub", specifier=f"=={download_client().hub_version}", installer="model_weights",
            index_url=rv.get("model_weights_pip_index_url") or None,
            find_links=rv.get("model_weights_pip_find_links") or None,
        )  # fmt: skip
    if spec.mooncake is not None:
        name, specifier = _requirement(
            rv.get("mooncake_pip_package") or catalog["mooncake"][spec.mooncake.protocol]
        )
        out[name] = PipInstall(
            name=name,
            specifier=specifier,
            installer="mooncake",
            find_links=rv.get("mooncake_wheels_dir") or None,
        )
    return out


def _pinned(want: PipInstall, lock: StackLock | None) -> LockedPackage | None:
    locked = lock.packages.get(want.name) if lock is not None else None
    return locked if locked is not None and want.allows(locked) else None


def locked_for(
    installs: Mapping[str, PipInstall], lock: StackLock | None, installer: Installer
) -> dict[str, LockedPackage]:
    """The lock's entries for what `installer` installs: only those the lock pins at a version the
    stack still asks for (the others stay floating, and `plan` says so)."""
    out = {}
    for name, want in installs.items():
        locked = _pinned(want, lock) if want.installer == installer else None
        if locked is not None:
            out[name] = locked
    return out


def unlocked(installs: Mapping[str, PipInstall], lock: StackLock | None) -> list[str]:
    """The distributions the lock does not pin at a version the stack asks for."""
    return [f"{name}{want.specifier}" for name, want in installs.items() if _pinned(want, lock) is None]


def no_wheel(installs: Mapping[str, PipInstall], lock: StackLock | None) -> list[str]:
    """The lock's entries that the stack's nodes cannot install: a version with no wheel for the
    platform its installer runs on (such a lock was written for other nodes, or by hand)."""
    from flashfleet.package_index import fits

    out = []
    for name, want in installs.items():
        locked = _pinned(want, lock)
        platform = want.platform
        if locked is not None and platform is not None and not any(fits(f, platform) for f in locked.files):
            out.append(f"packages.{name}: {locked.version} has no linux {platform} wheel")
    return out
