"""The SGLang image a stack runs (``image:`` in the stack file), and the refs derived from it."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from flashfleet.catalog import Hardware
from flashfleet.catalog.releases import MIN_VERSION, parse_version
from flashfleet.stack import safe_values

DERIVED_REPOSITORY = "flashfleet/sglang"
_EXACT_VERSION = re.compile(r"^\d+(\.\d+){1,3}(\.post\d+)?$")


class ImageSpec(BaseModel):
    """The SGLang image a stack runs: a pinned release, never a floating tag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = "lmsysorg/sglang"
    version: str = Field("v0.5.23", description="SGLang release, v0.5.20 or later")
    tag: str | None = Field(None, description="full tag override; must start with the version")
    digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    derived: StrictBool = Field(
        True, description="run the derived image with the Transformers pin and torchcodec"
    )
    includes: tuple[str, ...] = Field((), description="PRs this build is known to contain, e.g. '#42178'")
    # The stack's own exact versions of the multimodal packages, where it wants other than what
    # the release ships (flashfleet/stack/image_packages.py checks them against the release).
    packages: dict[Literal["transformers", "tokenizers", "torchcodec"], str] = Field(
        default_factory=dict, description="exact versions of transformers, tokenizers or torchcodec"
    )

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        return safe_values.image_repository(value)

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        return None if value is None else safe_values.image_tag(value)

    @field_validator("version")
    @classmethod
    def _release(cls, value: str) -> str:
        if parse_version(value) < MIN_VERSION:
            raise ValueError(f"{value} predates GLM-5.3-Flash support (v0.5.20 or later)")
        return value

    @field_validator("includes")
    @classmethod
    def _pr_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pr in value:
            if not re.fullmatch(r"#\d+", pr):
                raise ValueError(f"{pr!r}: write pull requests as '#12345'")
        return value

    @field_validator("packages")
    @classmethod
    def _exact_versions(cls, value: dict[str, str]) -> dict[str, str]:
        for name, version in value.items():
            if not _EXACT_VERSION.fullmatch(version):
                raise ValueError(f"{name}: {version!r} is not an exact release version like 5.19.0")
        return value

    @model_validator(mode="after")
    def _pinned(self) -> ImageSpec:
        if self.tag is not None:
            if safe_values.FLOATING_TAG.search(self.tag):
                raise ValueError(f"tag {self.tag!r} floats; pin a release tag")
            if not self.tag.startswith(self.version):
                raise ValueError(f"tag {self.tag!r} must start with the version {self.version}")
        return self

    def tagged_ref(self, hw: Hardware) -> str:
        """``repository:tag`` of the node's upstream image: what a lock resolves to a digest."""
        return f"{self.repository}:{self.tag or f'{self.version}{hw.image_suffix}'}"

    def base_ref(self, hw: Hardware) -> str:
        """Upstream image for the node: CUDA arm64/x86_64 or ROCm build of the pinned release."""
        return f"{self.tagged_ref(hw)}@{self.digest}" if self.digest else self.tagged_ref(hw)

    def derived_ref(self, hw: Hardware) -> str:
        """Local image the sglang_image role builds on top of the base (FFmpeg, what the release
        lacks of the multimodal packages), named for the transformers it holds.

        The one place this name is made: the role receives it (sglang_image_derived) and builds
        exactly it, and the serving units run it.
        """
        from flashfleet.stack.image_packages import image_packages

        tag = self.tagged_ref(hw).rpartition(":")[2]
        held = image_packages(self.version, hw, self.packages).get("transformers")
        version = held.specifier.lstrip("=>") if held is not None else "unknown"
        return f"{DERIVED_REPOSITORY}:{tag}-tf{version}"

    def ref(self, hw: Hardware) -> str:
        return self.derived_ref(hw) if self.derived else self.base_ref(hw)
