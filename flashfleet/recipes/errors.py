"""The one error type the recipe engine raises for bad input."""

from __future__ import annotations


class RecipeError(ValueError):
    """A refused input: names the field (option, hardware, ...) and the rule it broke."""

    def __init__(self, field: str, rule: str, message: str, source: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.rule = rule
        self.message = message
        self.source = source

    def __str__(self) -> str:
        return self.message
