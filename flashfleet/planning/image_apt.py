"""What the derived image apt-installs from its base image's distribution archive (FFmpeg, which
torchcodec loads), decided once: which archive, suites and components, for the node's
architecture, and whether a stack's lock holds it.

The distribution is the base image's own, read by `flashfleet lock` from its labels
(`org.opencontainers.image.ref.name` and `.version`, as Ubuntu's images carry them); the archive
is its snapshot service's (node_packages.toml's [image_apt]), or a mirror of it the stack's
site section names (`site.apt.ubuntuSnapshots`). A lock holds one snapshot of it, `<archive>/<moment>`,
which the build reads instead of the base's own sources (roles/sglang_image).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from flashfleet.catalog import Hardware, image_apt
from flashfleet.planning.apt_packages import DEB_ARCH
from flashfleet.stack.lock import LockedImageApt, StackLock
from flashfleet.stack.spec import StackSpec

LABEL_NAME = "org.opencontainers.image.ref.name"
LABEL_VERSION = "org.opencontainers.image.version"
ARCHIVE_VAR = "sglang_image_apt_archive"


class ImageAptWant(BaseModel):
    """What the derived image's build asks apt for from one distribution's archive."""

    model_config = ConfigDict(frozen=True)

    distribution: str  # "ubuntu noble"
    archive: str  # the snapshot service's archive URL (a moment is appended)
    suites: tuple[str, ...]
    components: tuple[str, ...]
    arch: str  # Debian's name for the node's
    install: tuple[str, ...]

    def snapshot(self, moment: str) -> str:
        return f"{self.archive.rstrip('/')}/{moment}"


def distribution(labels: Mapping[str, str]) -> str | None:
    """ "ubuntu noble" from an image's labels; None when they do not name a distribution the
    catalog knows the archive of."""
    catalog = image_apt().distributions
    name, release = labels.get(LABEL_NAME, ""), labels.get(LABEL_VERSION, "")
    if name not in catalog or release not in catalog[name].codenames:
        return None
    return f"{name} {catalog[name].codenames[release]}"


def image_apt_want(hw: Hardware, site_args: Mapping[str, Any], dist: str) -> ImageAptWant:
    """The derived image's apt want on `dist` ("ubuntu noble") for the node's architecture."""
    name, codename = dist.split(" ")
    catalog = image_apt()
    archive = catalog.distributions[name]
    return ImageAptWant(
        distribution=dist,
        archive=str(site_args.get(ARCHIVE_VAR) or archive.archive[hw.arch]),
        suites=tuple(s.format(codename=codename) for s in archive.suites),
        components=archive.components,
        arch=DEB_ARCH[hw.arch],
        install=catalog.packages,
    )


def image_apt_lock(
    spec: StackSpec, hw: Hardware, site_args: Mapping[str, Any], lock: StackLock | None
) -> LockedImageApt | None:
    """The lock's entry for the derived image's base when it still answers what the stack asks:
    the node's architecture, every package, and a snapshot of the archive the stack names now."""
    held = lock.image_apt.get(spec.image.tagged_ref(hw)) if lock is not None else None
    if held is None or held.distribution.split(" ")[0] not in image_apt().distributions:
        return None
    want = image_apt_want(hw, site_args, held.distribution)
    fits = (
        held.arch == want.arch
        and held.snapshot.startswith(want.archive.rstrip("/") + "/")
        and set(want.install) <= set(held.packages)
        and set(want.suites) == set(held.suites)
    )
    return held if fits else None
