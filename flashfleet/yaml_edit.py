"""Round-trip edits of a YAML file that a person also edits: comments, quotes and indentation kept.

Used wherever flashfleet writes into a stack file (`size --write`, `capacity buy`). Imports
ruamel.yaml and the spec layer's strict reader (UTF-8 only, one line when not), so any layer
above the spec may use it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from flashfleet.stack.yamlfile import YamlFileError, parse_yaml, read_text

T = TypeVar("T")


class YamlEditError(ValueError):
    """The file cannot be edited as asked (not YAML, or a key that is not a mapping)."""


def round_trip_yaml() -> YAML:
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines the user wrote
    return yaml


def indentation(text: str) -> tuple[int, int]:
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


def child_mapping(parent: CommentedMap, key: str, where: str) -> CommentedMap:
    """``parent[key]``, created empty when missing; refused when it is something else."""
    if key not in parent or parent[key] is None:
        parent[key] = CommentedMap()
    child = parent[key]
    if not isinstance(child, CommentedMap):
        raise YamlEditError(f"{where}: {key!r} is not a mapping")
    return child


def _text(path: Path) -> str:
    """The file's text, refused as the stack loader refuses it (not UTF-8, not YAML, a key twice)."""
    try:
        text = read_text(path)
        parse_yaml(text)
        return text
    except YamlFileError as err:
        raise YamlEditError(f"{path.name}: {err}") from None


def load_round_trip(path: Path) -> CommentedMap:
    """The document of ``path`` for reading (an empty file is an empty mapping)."""
    try:
        doc = round_trip_yaml().load(_text(path))
    except Exception as err:  # ruamel raises several unrelated types for bad YAML
        raise YamlEditError(f"{path.name} is not valid YAML: {str(err).splitlines()[0]}") from None
    if doc is None:
        return CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise YamlEditError(f"{path.name}: the top level is not a mapping")
    return doc


def edit_yaml(path: Path, change: Callable[[CommentedMap], T]) -> T:
    """Load ``path``, let ``change`` edit the document in place, write it back in the file's layout.

    Nothing is written when ``change`` raises.
    """
    text = _text(path)
    doc = load_round_trip(path)
    result = change(doc)
    yaml = round_trip_yaml()
    mapping, dash = indentation(text)
    yaml.indent(mapping=mapping, sequence=dash + 2, offset=dash)
    out = io.StringIO()
    yaml.dump(doc, out)
    path.write_text(out.getvalue(), encoding="utf-8")
    return result
