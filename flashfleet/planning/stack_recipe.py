"""A stack's recipe: the recipe engine's render of the stack's hardware, strategy, topology and
options, and a RecipeError turned into a problem that names the stack key it comes from."""

from __future__ import annotations

from flashfleet.recipes import Recipe, RecipeError, render
from flashfleet.stack.errors import Problem
from flashfleet.stack.spec import StackSpec

# Recipe fields that are keys of the stack itself, not options.
_TOP_LEVEL = {"hardware": "hardware", "strategy": "strategy", "topology": "topology", "image": "image"}


def recipe_path(spec: StackSpec | None, field: str) -> str:
    """The stack key a RecipeError's field comes from."""
    if field in _TOP_LEVEL:
        return _TOP_LEVEL[field]
    if field == "nodes":
        return "nodes.count"
    # Unknown or misspelled option names arrive as written in the stack.
    return f"options.{field}"


def render_stack(spec: StackSpec, addresses: list[str] | None = None) -> Recipe:
    overrides = {**spec.options, "nodes": spec.nodes.count}
    return render(spec.hardware, spec.strategy, spec.topology, overrides, addresses=addresses)


def recipe_problem(spec: StackSpec, err: RecipeError, base: str) -> Problem:
    return Problem(f"{base}.{recipe_path(spec, err.field)}", err.message, err.rule)
