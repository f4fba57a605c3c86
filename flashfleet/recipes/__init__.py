"""The recipe engine: the GLM-5.3-Flash deployment panel as a typed library.

``render(hardware, strategy, topology, overrides)`` returns a ``Recipe`` whose processes carry
argv lists (never shell strings), or raises ``RecipeError`` naming the option and the rule.
Imports neither pulumi nor ansible: the CLI's render/matrix paths stay fast.
"""

from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.layouts import STRATEGIES, TOPOLOGIES
from flashfleet.recipes.options import OPTION_DEFS, Options, parse_assignments, parse_overrides
from flashfleet.recipes.render import Process, Recipe, render, resolve

__all__ = [
    "OPTION_DEFS",
    "STRATEGIES",
    "TOPOLOGIES",
    "Options",
    "Process",
    "Recipe",
    "RecipeError",
    "parse_assignments",
    "parse_overrides",
    "render",
    "resolve",
]
