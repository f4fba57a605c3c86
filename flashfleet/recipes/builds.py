"""Build requirements: which SGLang changes a recipe needs, from catalog/builds.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from flashfleet.catalog.releases import parse_version
from flashfleet.catalog.tables import of, table
from flashfleet.recipes.options import Options


@dataclass(frozen=True)
class BuildRequirement:
    id: str
    pr: str
    since: str  # first release known to contain it; "" when not recorded
    summary: str
    source: str
    when: dict[str, Any] = field(default_factory=dict)
    hardware: tuple[str, ...] = ()

    def applies(self, hardware: str, options: Options) -> bool:
        if self.hardware and hardware not in self.hardware:
            return False
        values = options.as_dict()
        for option, wanted in self.when.items():
            allowed = wanted if isinstance(wanted, list) else [wanted]
            if values[option] not in allowed:
                return False
        return True

    def note(self) -> str:
        release = f"first in {self.since}" if self.since else "first release not recorded"
        return f"needs a build with PR {self.pr} ({self.summary}; {release})"

    def satisfied_by(self, version: str, includes: tuple[str, ...]) -> bool:
        if self.pr in includes:
            return True
        return bool(self.since) and parse_version(version) >= parse_version(self.since)


@cache
def build_requirements() -> tuple[BuildRequirement, ...]:
    text = resources.files("flashfleet.catalog").joinpath("builds.toml").read_text(encoding="utf-8")
    out = []
    for raw in table(tomllib.loads(text), "builds.toml", ("requirement",))["requirement"]:
        entry = dict(of(BuildRequirement, "builds.toml [[requirement]]", raw))
        entry["hardware"] = tuple(entry.get("hardware", ()))
        out.append(BuildRequirement(**entry))
    return tuple(out)


def applicable(hardware: str, options: Options) -> list[BuildRequirement]:
    return [r for r in build_requirements() if r.applies(hardware, options)]
