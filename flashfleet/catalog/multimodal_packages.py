"""flashfleet/catalog/image_packages.toml, read strictly: the seed's multimodal packages,
torchcodec's compatibility table, and each SGLang release's own requirements."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict


class SeedPins(BaseModel):
    """What the seed needs of the image beyond any release: Glm5NextProcessor's transformers and
    the tokenizers it requires, and the transformers releases refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    transformers: str  # a specifier: >=5.17.0
    tokenizers: str
    refused_transformers: tuple[str, ...]


class TorchcodecTable(BaseModel):
    """torchcodec's compatibility table: a torchcodec minor (0.9) -> the torch it loads beside."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    torch: dict[str, str]

    def torch_for(self, torchcodec: str) -> str | None:
        """The torch specifier the table pairs with this torchcodec release, or None (not listed)."""
        from packaging.version import Version

        release = Version(torchcodec).release
        return self.torch.get(".".join(str(part) for part in release[:2]))


class ReleaseRequirements(BaseModel):
    """What one SGLang release's own wheel requires (its `Requires-Dist`, markers as written)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    requires: tuple[str, ...]


class RouterPin(BaseModel):
    """The cluster router's package (SMG), which the derived image installs where smg routes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    smg: str  # an exact version: 1.13.0


class ImagePackagesCatalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: SeedPins
    torchcodec: TorchcodecTable
    router: RouterPin
    releases: dict[str, ReleaseRequirements]


@cache
def image_packages_catalog() -> ImagePackagesCatalog:
    """flashfleet/catalog/image_packages.toml, read strictly (an unknown key is an error)."""
    text = resources.files("flashfleet.catalog").joinpath("image_packages.toml").read_text(encoding="utf-8")
    return ImagePackagesCatalog.model_validate(tomllib.loads(text))
