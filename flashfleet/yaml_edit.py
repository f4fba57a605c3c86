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
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from flashfleet.stack.yamlfile import YamlFileError, parse_yaml, read_text
from flashfleet.user_files import write_text_atomically

T = TypeVar("T")


class YamlEditError(ValueError):
    """The file cannot be edited as asked (not YAML, or a key that is not a mapping)."""


def round_trip_yaml() -> YAML:
    yaml = YAML()  # round-trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines the user wrote
    return yaml


def mapping_indent(doc: object) -> int | None:
    """How far the first nested block mapping's keys sit inside their key, from ruamel's positions.

    ruamel's ``load_yaml_guess_indent`` gives the sequence layout but, once the file has a
    sequence, not the mapping indent (its usual recipe would then indent mappings as sequences)."""
    todo = [doc]
    for node in todo:  # breadth first: the file's outer levels first
        if isinstance(node, CommentedMap):
            for key, child in node.items():
                block = isinstance(child, CommentedMap) and child and not child.fa.flow_style()
                if block and (step := int(child.lc.col - node.lc.key(key)[1])) > 0:
                    return step
                todo.append(child)
        elif isinstance(node, CommentedSeq):
            todo.extend(node)
    return None


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


def _load(path: Path) -> tuple[CommentedMap, int | None, int | None]:
    """The document of ``path`` (an empty file is an empty mapping), its sequences' indent and the
    dash's offset within it (None when the file has no block sequence)."""
    try:
        doc, sequence, dash = load_yaml_guess_indent(_text(path), yaml=round_trip_yaml())
    except YamlEditError:
        raise
    except Exception as err:  # ruamel raises several unrelated types for bad YAML
        raise YamlEditError(f"{path.name} is not valid YAML: {str(err).splitlines()[0]}") from None
    if doc is None:
        return CommentedMap(), sequence, dash
    if not isinstance(doc, CommentedMap):
        raise YamlEditError(f"{path.name}: the top level is not a mapping")
    return doc, sequence, dash


def load_round_trip(path: Path) -> CommentedMap:
    """The document of ``path`` for reading (an empty file is an empty mapping)."""
    return _load(path)[0]


def edit_yaml(path: Path, change: Callable[[CommentedMap], T]) -> T:
    """Load ``path``, let ``change`` edit the document in place, write it back in the file's layout
    (indents measured before the change; 2 and "  - " when the file shows none).

    Nothing is written when ``change`` raises.
    """
    doc, sequence, dash = _load(path)
    mapping = mapping_indent(doc) or 2
    result = change(doc)
    yaml = round_trip_yaml()
    if dash is None or sequence is None:
        yaml.indent(mapping=mapping, sequence=4, offset=2)
    else:
        yaml.indent(mapping=mapping, sequence=sequence, offset=dash)
    out = io.StringIO()
    yaml.dump(doc, out)
    write_text_atomically(path, out.getvalue())  # whole or not at all (a full disk, Ctrl-C)
    return result
