"""Every hardware x strategy x topology cell: its badge, or why it is disabled, and which
single option choices the rules refuse there."""

from __future__ import annotations

from dataclasses import dataclass, field

from flashfleet.catalog import hardware_catalog
from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.layouts import STRATEGIES, TOPOLOGIES
from flashfleet.recipes.options import OPTION_DEFS
from flashfleet.recipes.render import render


@dataclass(frozen=True)
class Cell:
    hardware: str
    strategy: str
    topology: str
    badge: str | None
    disabled_reason: str | None
    disabled_choices: dict[str, dict[str, str]] = field(default_factory=dict)


def _disabled_choices(hw: str, strategy: str, topology: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name, definition in OPTION_DEFS.items():
        for choice in definition.choices:
            try:
                render(hw, strategy, topology, {name: choice})
            except RecipeError as err:
                out.setdefault(name, {})[choice] = err.message
    return out


def matrix(*, with_choices: bool = True) -> list[Cell]:
    cells = []
    for hw in hardware_catalog():
        for strategy in STRATEGIES:
            for topology in TOPOLOGIES:
                try:
                    recipe = render(hw, strategy, topology)
                except RecipeError as err:
                    cells.append(Cell(hw, strategy, topology, None, err.message))
                    continue
                choices = _disabled_choices(hw, strategy, topology) if with_choices else {}
                cells.append(Cell(hw, strategy, topology, recipe.badge, None, choices))
    return cells
