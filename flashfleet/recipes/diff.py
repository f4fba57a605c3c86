"""The Playground view: what overrides change in each process's command line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flashfleet.recipes.flags import argv_units
from flashfleet.recipes.render import Recipe, render


@dataclass(frozen=True)
class ProcessDiff:
    name: str
    removed: tuple[str, ...]
    added: tuple[str, ...]


@dataclass(frozen=True)
class RecipeDiff:
    base: Recipe
    changed: Recipe
    processes: tuple[ProcessDiff, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_badge": self.base.badge,
            "badge": self.changed.badge,
            "processes": [
                {"name": p.name, "removed": list(p.removed), "added": list(p.added)} for p in self.processes
            ],
        }


def diff(hardware: str, strategy: str, topology: str, overrides: Mapping[str, object]) -> RecipeDiff:
    base = render(hardware, strategy, topology)
    changed = render(hardware, strategy, topology, overrides)
    old = {p.name: [" ".join(u) for u in argv_units(p.argv)] for p in base.processes}
    procs = []
    for p in changed.processes:
        new = [" ".join(u) for u in argv_units(p.argv)]
        before = old.get(p.name, [])
        removed = tuple(u for u in before if u not in new)
        added = tuple(u for u in new if u not in before)
        if removed or added:
            procs.append(ProcessDiff(p.name, removed, added))
    return RecipeDiff(base, changed, tuple(procs))
