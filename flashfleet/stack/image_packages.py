"""What the serving image holds of the packages GLM-5.3-Flash's multimodal path needs, decided once
for each node platform: which the SGLang release ships itself, which the derived image adds, and
why.

The release's own requirements come first (its wheel's `Requires-Dist`, markers evaluated for the
node's platform: flashfleet/catalog/image_packages.toml); the derived image adds only what the
release falls short of for the seed:
- transformers: at least the seed's floor (the first release with Glm5NextProcessor), never below
  the release's own pin;
- tokenizers: the seed's floor, which the release's own pin satisfies where it is recent enough;
- torchcodec: only where the release leaves it out (its marker excludes aarch64), at the version
  the release pairs with the same torch elsewhere, checked against torchcodec's table.
A stack may pin one of them itself (`image.packages`); a pin the release or the table contradicts
is refused, naming the package, both versions and the source. The ROCm images run AMD's torch, not
PyPI's: no torchcodec build is known to load beside it, so video stays unverified there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from flashfleet.catalog import Hardware
from flashfleet.catalog.multimodal_packages import ReleaseRequirements, image_packages_catalog

Name = Literal["transformers", "tokenizers", "torchcodec"]
NAMES: tuple[Name, ...] = ("transformers", "tokenizers", "torchcodec")
# `Requires-Dist` markers read for a node: the keys the release's markers use (PEP 508 names)
_MACHINE = {"x86_64": "x86_64", "arm64": "aarch64"}
_PLATFORM = {"x86_64": "linux/amd64", "arm64": "linux/arm64"}


class ImagePinError(ValueError):
    """A package the stack pins that the release or torchcodec's table contradicts: the field
    (image.packages.<name>) and a message naming both versions and the source."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class ImagePackage(BaseModel):
    """One package the serving image must hold, and who puts it there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    specifier: str  # what the image must hold: ==5.19.0, >=0.23.1
    origin: Literal["release", "derived"]  # shipped by the release, or installed by the derived build
    why: str
    # the release's own pin this one replaces on purpose (==5.12.1 under the seed's 5.17.0):
    # the one conflict the in-image `pip check` accepts, by name
    overrides: str | None = None

    @property
    def requirement(self) -> str:
        return f"{self.name}{self.specifier}"


class ImagePackages(BaseModel):
    """What one node platform's serving image holds of the multimodal packages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    release: str  # image.version, e.g. v0.5.23
    platform: str  # linux/amd64, linux/arm64 (ROCm: linux/amd64)
    source: str  # where the release's requirements come from, or why they are unknown
    torch: str | None  # the release's torch, e.g. ==2.14.1; None: not PyPI's (ROCm) or unknown
    packages: tuple[ImagePackage, ...]
    video: str | None  # None: torchcodec is in the image; else why video is not verified here
    refused_transformers: tuple[str, ...]

    def get(self, name: str) -> ImagePackage | None:
        return next((p for p in self.packages if p.name == name), None)

    @property
    def installs(self) -> tuple[ImagePackage, ...]:
        """What the derived build pip-installs (the rest the release ships)."""
        return tuple(p for p in self.packages if p.origin == "derived")

    def role_pins(self) -> list[dict[str, str | bool | None]]:
        """The sglang_image role's `sglang_image_pins`: each package, and whether the build installs it."""
        return [
            {
                "name": p.name,
                "specifier": p.specifier,
                "install": p.origin == "derived",
                "overrides": p.overrides,
            }
            for p in self.packages
        ]


def with_router(held: ImagePackages, smg: bool) -> ImagePackages:
    """The image's packages, and SMG where the stack's router is smg (`StackSpec.router_program`):
    the derived build installs it at the catalog's version, the lock pins its wheels by hash."""
    if not smg:
        return held
    pin = image_packages_catalog().router
    why = f"the cluster's router, `smg launch` ({pin.source})"
    package = ImagePackage(name="smg", specifier=f"=={pin.smg}", origin="derived", why=why)
    return held.model_copy(update={"packages": (*held.packages, package)})


def _release_pins(release: ReleaseRequirements, hw: Hardware) -> tuple[dict[str, str], dict[str, str]]:
    """(this platform's pins, every pin whatever its marker): name -> specifier."""
    from packaging.requirements import Requirement

    env = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": _MACHINE[hw.arch],
    }
    here: dict[str, str] = {}
    anywhere: dict[str, str] = {}
    for text in release.requires:
        req = Requirement(text)
        anywhere[req.name] = str(req.specifier)
        if req.marker is None or req.marker.evaluate(env):
            here[req.name] = str(req.specifier)
    return here, anywhere


def _exact(specifier: str | None) -> str | None:
    """The version an exact pin (==X) names, else None."""
    if specifier and specifier.startswith("==") and "*" not in specifier:
        return specifier[2:]
    return None


def _allows(specifier: str, version: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(specifier).contains(version, prereleases=True)


def _floor_version(specifier: str) -> str:
    return specifier.removeprefix(">=")


def image_packages(
    version: str, hw: Hardware, pins: Mapping[Name, str] | None = None,
    release: ReleaseRequirements | None = None,
) -> ImagePackages:  # fmt: skip
    """What the image of release `version` holds on `hw`'s nodes. `pins`: the stack's own exact
    versions (image.packages); `release`: the release's requirements where the catalog has none
    (read by `flashfleet lock` from the release's wheel). Raises ImagePinError."""
    catalog = image_packages_catalog()
    seed = catalog.seed
    pinned: dict[str, str] = {str(name): value for name, value in (pins or {}).items()}
    release = release or catalog.releases.get(version)
    rocm = hw.vendor == "amd"
    if release is None:
        here: dict[str, str] = {}
        anywhere: dict[str, str] = {}
        source = (
            f"unknown: the catalog has no requirements for {version} "
            "(scripts/release_requirements.py reads them from the release's wheel)"
        )
    else:
        here, anywhere = _release_pins(release, hw)
        source = release.source
        if rocm:  # AMD's torch build: PyPI's torch and torchcodec pins say nothing of it
            for name in ("torch", "torchcodec"):
                here.pop(name, None)
                anywhere.pop(name, None)
    torch = here.get("torch")
    if pinned.get("transformers") in seed.refused_transformers:
        raise ImagePinError(
            "image.packages.transformers",
            f"{pinned['transformers']} is refused ({seed.source}: it has "
            "no Glm5NextProcessor and answers image requests from the text alone)",
        )
    out = [
        _floored(name, floor, shipped=here.get(name), pinned=pinned.get(name), version=version, source=source)
        for name, floor in (("transformers", seed.transformers), ("tokenizers", seed.tokenizers))
    ]
    codec, video = _torchcodec(
        here,
        anywhere,
        pinned=pinned.get("torchcodec"),
        torch=torch,
        version=version,
        source=source,
        rocm=rocm,
    )
    if codec is not None:
        out.append(codec)
    return ImagePackages(
        release=version, platform=_PLATFORM[hw.arch], source=source, torch=torch, packages=tuple(out),
        video=video, refused_transformers=seed.refused_transformers,
    )  # fmt: skip


def _floored(
    name: str, floor: str, *, shipped: str | None, pinned: str | None, version: str, source: str
) -> ImagePackage:
    """transformers or tokenizers: the release's own pin where it meets the seed's floor."""
    from packaging.version import Version

    seed = image_packages_catalog().seed.source
    shipped_version = _exact(shipped)
    if pinned is not None:
        if not _allows(floor, pinned):
            raise ImagePinError(
                f"image.packages.{name}", f"{pinned} is below the seed's {name}{floor} ({seed})"
            )
        if shipped_version is not None and Version(pinned) < Version(shipped_version):
            raise ImagePinError(
                f"image.packages.{name}",
                f"{pinned} is below the release {version}'s own {name}=={shipped_version} ({source})",
            )
        if pinned == shipped_version:
            return ImagePackage(name=name, specifier=f"=={pinned}", origin="release", why=source)
        why = "the stack's image.packages"
        return ImagePackage(name=name, specifier=f"=={pinned}", origin="derived", why=why, overrides=shipped)
    if shipped_version is not None and _allows(floor, shipped_version):
        why = f"{source}; meets the seed's {floor}"
        return ImagePackage(name=name, specifier=f"=={shipped_version}", origin="release", why=why)
    if shipped_version is not None:  # the release's own pin is below the seed's floor
        why = f"the release pins {name}=={shipped_version} ({source}), below the seed's {floor} ({seed})"
    else:
        why = f"the seed's {floor} ({seed}); the release's own pin is unknown"
    # transformers: the seed's own release; tokenizers: its floor (pip keeps a newer one)
    specifier = f"=={_floor_version(floor)}" if name == "transformers" and shipped_version else floor
    return ImagePackage(name=name, specifier=specifier, origin="derived", why=why, overrides=shipped)


def _torchcodec(
    here: Mapping[str, str], anywhere: Mapping[str, str], *, pinned: str | None, torch: str | None,
    version: str, source: str, rocm: bool,
) -> tuple[ImagePackage | None, str | None]:  # fmt: skip
    """torchcodec on this platform, and why video is not verified where it is not in the image."""
    table = image_packages_catalog().torchcodec
    shipped, paired = _exact(here.get("torchcodec")), _exact(anywhere.get("torchcodec"))
    if rocm:
        if pinned is not None:
            raise ImagePinError(
                "image.packages.torchcodec",
                f"{pinned} has no known build for the ROCm image's torch (AMD's, "
                "not PyPI's); video on MI355X was not evaluated (GLM-5.3-Flash SGLang guide)",
            )
        return None, (
            "the ROCm image runs AMD's torch build, beside which no torchcodec build is known to load, "
            "and the seed did not evaluate video on MI355X"
        )
    torch_version = _exact(torch)
    if torch_version is None:
        if pinned is not None:
            raise ImagePinError(
                "image.packages.torchcodec",
                f"{pinned} cannot be checked against the torch of {version}: its requirements are {source}",
            )
        return None, f"torchcodec unknown: the torch of {version} is unknown ({source})"
    if pinned is not None:
        _check_pairing(
            pinned, torch_version, paired=paired, version=version, source=source, table=table.source
        )
        if shipped is not None and pinned != shipped:
            raise ImagePinError(
                "image.packages.torchcodec",
                f"{pinned} differs from the release {version}'s own torchcodec=={shipped} ({source})",
            )
        origin = "release" if pinned == shipped else "derived"
        why = source if origin == "release" else "the stack's image.packages"
        return ImagePackage(name="torchcodec", specifier=f"=={pinned}", origin=origin, why=why), None
    if shipped is not None:
        return ImagePackage(name="torchcodec", specifier=f"=={shipped}", origin="release", why=source), None
    if paired is None:
        return None, f"the release {version} pins no torchcodec to pair with torch {torch_version} ({source})"
    _check_pairing(paired, torch_version, paired=paired, version=version, source=source, table=table.source)
    why = (
        f"the release leaves torchcodec out on this platform; {paired} is what it pairs with "
        f"torch=={torch_version} elsewhere ({source})"
    )
    return ImagePackage(name="torchcodec", specifier=f"=={paired}", origin="derived", why=why), None


def _check_pairing(
    codec: str, torch: str, *, paired: str | None, version: str, source: str, table: str
) -> None:
    """Refuses a torchcodec that does not load beside `torch`: the table's word, else the release's
    own pairing (a torchcodec newer than the table)."""
    wants = image_packages_catalog().torchcodec.torch_for(codec)
    if wants is not None:
        if not _allows(wants, torch):
            raise ImagePinError(
                "image.packages.torchcodec",
                f"{codec} loads beside torch{wants} ({table}), "
                f"the release {version} runs torch=={torch} ({source})",
            )
        return
    if codec != paired:
        raise ImagePinError(
            "image.packages.torchcodec",
            f"{codec} is not in {table} and the release {version} "
            f"pairs torchcodec=={paired} with torch=={torch} ({source})",
        )
