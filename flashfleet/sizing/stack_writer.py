"""Store a sizing result in a stack file so the next render carries the tuned flag.

Stack files are ``<stacks_dir>/Pulumi.<name>.yaml``; recipe option overrides live at
``config -> flashfleet:stack -> options``. The ratio and the pin are alternatives, so storing
one removes the other. Round-trip YAML keeps the file's comments and layout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap

from flashfleet.sizing.errors import SizingError
from flashfleet.stack.errors import STACK_KEY
from flashfleet.stack.files import list_stacks, stack_path
from flashfleet.yaml_edit import YamlEditError, child_mapping, edit_yaml, load_round_trip

SIZING_OPTIONS = ("mamba_full_memory_ratio", "max_mamba_cache_size")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def existing_stack_file(stacks_dir: Path, name: str) -> Path:
    if not _NAME.fullmatch(name):
        raise SizingError(f"stack name {name!r}: use letters, digits, '.', '_' or '-'")
    path = stack_path(name, stacks_dir)
    if not path.is_file():
        listed = ", ".join(list_stacks(stacks_dir)) or "none"
        raise SizingError(f"unknown stack {name!r}: no {path.name} in {stacks_dir} (stacks: {listed})")
    return path


def write_sizing(stacks_dir: Path, name: str, option: str, value: float | int) -> dict[str, Any]:
    """Set one sizing option in the stack's options, drop the other; return the options."""
    from flashfleet.recipes.errors import RecipeError
    from flashfleet.recipes.options import parse_overrides

    if option not in SIZING_OPTIONS:
        raise SizingError(f"{option!r} is not a sizing option ({', '.join(SIZING_OPTIONS)})")
    try:
        parse_overrides({option: value})  # the recipe engine must accept what we store
    except RecipeError as err:
        raise SizingError(f"cannot store {option}={value!r}: {err}") from None
    path = existing_stack_file(stacks_dir, name)

    def store(doc: CommentedMap) -> dict[str, Any]:
        stack = child_mapping(child_mapping(doc, "config", path.name), STACK_KEY, path.name)
        options = child_mapping(stack, "options", path.name)
        for other in SIZING_OPTIONS:
            if other != option and other in options:
                del options[other]
        options[option] = value
        return dict(options)

    try:
        return edit_yaml(path, store)
    except YamlEditError as err:
        raise SizingError(str(err)) from None


def read_options(stacks_dir: Path, name: str) -> dict[str, Any]:
    """The stack's recipe option overrides (empty when it has none)."""
    try:
        doc = load_round_trip(existing_stack_file(stacks_dir, name))
    except YamlEditError as err:
        raise SizingError(str(err)) from None
    stack = (doc.get("config") or {}).get(STACK_KEY) or {}
    return dict(stack.get("options") or {})
