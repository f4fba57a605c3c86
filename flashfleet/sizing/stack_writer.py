"""Store a sizing result in a stack file so the next render carries the tuned flag.

Stack files are ``<stacks_dir>/Pulumi.<name>.yaml``; recipe option overrides live at
``config -> flashfleet:stack -> options``. The ratio and the pin are alternatives, so storing
one removes the other. Round-trip YAML keeps the file's comments and layout.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from flashfleet.sizing.errors import SizingError
from flashfleet.stack.errors import STACK_KEY
from flashfleet.stack.files import list_stacks, stack_path

SIZING_OPTIONS = ("mamba_full_memory_ratio", "max_mamba_cache_size")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def existing_stack_file(stacks_dir: Path, name: str) -> Path:
    if not _NAME.match(name):
        raise SizingError(f"stack name {name!r}: use letters, digits, '.', '_' or '-'")
    path = stack_path(name, stacks_dir)
    if not path.is_file():
        listed = ", ".join(list_stacks(stacks_dir)) or "none"
        raise SizingError(f"unknown stack {name!r}: no {path.name} in {stacks_dir} (stacks: {listed})")
    return path


def _yaml() -> YAML:
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines the user wrote
    return yaml


def _indentation(text: str) -> tuple[int, int]:
    """The file's mapping indent and how far its "- " items sit inside their key (default 2, 2)."""
    mapping, dash = 0, -1
    previous: tuple[int, str] | None = None
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        depth = len(line) - len(body)
        if previous is not None:
            parent_depth, parent = previous
            opens_block = parent.split("#")[0].rstrip().endswith(":")
            if opens_block and depth > parent_depth:
                if body.startswith("- ") and dash < 0:
                    dash = depth - parent_depth
                elif not body.startswith("- ") and not mapping:
                    mapping = depth - parent_depth
        previous = (depth, body)
    return mapping or 2, dash if dash >= 0 else 2


def _mapping(parent: CommentedMap, key: str, where: str) -> CommentedMap:
    if key not in parent or parent[key] is None:
        parent[key] = CommentedMap()
    child = parent[key]
    if not isinstance(child, CommentedMap):
        raise SizingError(f"{where}: {key!r} is not a mapping")
    return child


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
    yaml = _yaml()
    text = path.read_text(encoding="utf-8")
    try:
        doc = yaml.load(text)
    except Exception as err:  # ruamel raises several unrelated types for bad YAML
        raise SizingError(f"{path.name} is not valid YAML: {str(err).splitlines()[0]}") from None
    mapping, dash = _indentation(text)
    yaml.indent(mapping=mapping, sequence=dash + 2, offset=dash)
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise SizingError(f"{path.name}: the top level is not a mapping")
    options = _mapping(
        _mapping(_mapping(doc, "config", path.name), STACK_KEY, path.name), "options", path.name
    )
    for other in SIZING_OPTIONS:
        if other != option and other in options:
            del options[other]
    options[option] = value
    out = io.StringIO()
    yaml.dump(doc, out)
    path.write_text(out.getvalue(), encoding="utf-8")
    return dict(options)


def read_options(stacks_dir: Path, name: str) -> dict[str, Any]:
    """The stack's recipe option overrides (empty when it has none)."""
    doc = _yaml().load(existing_stack_file(stacks_dir, name).read_text(encoding="utf-8")) or {}
    stack = (doc.get("config") or {}).get(STACK_KEY) or {}
    return dict(stack.get("options") or {})
