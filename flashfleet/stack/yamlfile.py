"""Reading a user's YAML (or JSON) file strictly: UTF-8 only, no duplicate keys, bounded.

PyYAML keeps the last of two equal keys without a word, so `strategy:` written twice would
silently switch the recipe; ruamel.yaml's safe loader refuses it, and the line of the second one
is reported. Every failure is one `YamlFileError` line (the caller prefixes the file's role),
never a traceback.

A checkout can be hostile, so reading is bounded: only a regular file is read (a FIFO would
block `validate`, a link to /dev/zero fill the memory), at most `MAX_BYTES`, and a document whose
aliases expand it beyond `MAX_NODES` values (a "billion laughs" of a kilobyte) is refused before
anything walks it.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from pathlib import Path
from typing import Any


class YamlFileError(ValueError):
    """The file cannot be read as YAML; the message is one line, without the path."""


# ruamel's wording of a repeated key; only the key is kept (the values may be secrets).
_DUPLICATE = re.compile(r'found duplicate key "(.*)" with value ', re.DOTALL)


# Deeper than any real file (a stack is about eight levels); far below Python's recursion limit,
# which PyYAML's composer, pydantic and the error formatter would otherwise meet as a traceback.
MAX_DEPTH = 64


# Far above any real stack file (a few KB) or lock (every file of a checkpoint and every apt
# package: a few hundred KB).
MAX_BYTES = 16 * 1024 * 1024
# Values of the document with every alias expanded, as a validator or a formatter would walk it:
# a real lock holds a few thousand.
MAX_NODES = 200_000


def _expanded_size(doc: Any) -> int:
    """How many values `doc` holds once every alias is expanded (a shared node counts each time
    it is referenced), computed once per node: linear in the document as parsed."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:  # the depth is bounded (_depth_ok) before this runs
        if not isinstance(node, dict | list):
            return 1
        known = sizes.get(id(node))
        if known is None:
            children = list(node.values()) + list(node.keys()) if isinstance(node, dict) else node
            known = sizes[id(node)] = min(1 + sum(size(c) for c in children), MAX_NODES + 1)
        return known

    return size(doc)


def _depth_ok(doc: Any) -> bool:
    stack = [(doc, 1)]
    shallowest: dict[int, int] = {}  # an alias shares a node: walk it again only if less slack
    while stack:  # iterative: the check itself must not recurse
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if shallowest.get(id(node), MAX_DEPTH + 1) <= depth:
            continue
        shallowest[id(node)] = depth
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return True


# YAML 1.1's booleans, integers and floats exactly as PyYAML reads them: ruamel.yaml's YAML 1.1
# also takes y/Y/n/N as booleans and 1e5 or 0E0 (no dot) as floats, so `sshUser: n` or
# `modelCacheDir: 0E0`, left unquoted by a PyYAML writer that reads them as text, would change type.
_PYYAML_TAGS = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _pyyaml_scalars(resolver: Any) -> None:
    from ruamel.yaml.resolver import implicit_resolvers
    from yaml.resolver import Resolver as PyYamlResolver

    pyyaml = {tag: rx for entries in PyYamlResolver.yaml_implicit_resolvers.values() for tag, rx in entries}
    for versions, tag, regexp, first in implicit_resolvers:
        if (1, 1) in versions:
            ours = pyyaml[tag] if tag in _PYYAML_TAGS else regexp
            resolver.add_version_implicit_resolver((1, 1), tag, ours, first)


def parse_yaml(text: str) -> Any:
    # Imported here: ruamel.yaml costs about 0.1 s, and refusals that never parse should not pay it.
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import YAMLError

    too_deep = f"nested more than {MAX_DEPTH} levels deep (a stack file needs about eight)"
    loader = YAML(typ="safe", pure=True)
    loader.version = (1, 1)  # read as PyYAML does (yes/no booleans, 0755 octal): files written for it
    _pyyaml_scalars(loader.resolver)
    try:
        with warnings.catch_warnings():  # its YAML 1.1 float advice is a paragraph on stderr
            warnings.simplefilter("ignore")
            doc = loader.load(text)
    except DuplicateKeyError as exc:
        named = f"key {m.group(1)!r}" if (m := _DUPLICATE.search(exc.problem or "")) else "a key"
        line = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark is not None else ""
        raise YamlFileError(f"{named} appears twice in one mapping{line}") from None
    except YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise YamlFileError(f"not valid YAML{line}: {problem}") from None
    except RecursionError:  # deeper than the parser itself can go
        raise YamlFileError(too_deep) from None
    if not _depth_ok(doc):
        raise YamlFileError(too_deep)
    if _expanded_size(doc) > MAX_NODES:
        raise YamlFileError(
            f"its aliases expand it to more than {MAX_NODES} values (a stack or lock needs a few thousand)"
        )
    return doc


def _read_bounded(path: Path) -> bytes:
    """A regular file's bytes, at most MAX_BYTES; never blocks on a FIFO or reads a device."""
    # O_NONBLOCK: opening a FIFO returns at once (a plain open would wait for a writer)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a directory"
                if stat.S_ISDIR(mode)
                else "a device or socket"
            )
            raise YamlFileError(f"not a regular file ({kind}); a stack or lock is a plain file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise YamlFileError(
            f"larger than {MAX_BYTES // (1024 * 1024)} MiB; a stack or lock is a few hundred KB at most"
        )
    return data


def read_text(path: Path) -> str:
    """The file as UTF-8 text, or one line saying why not."""
    try:
        data = _read_bounded(path)
    except OSError as err:
        raise YamlFileError(err.strerror or type(err).__name__) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlFileError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); save it as UTF-8"
        ) from None


def load_yaml_file(path: Path) -> Any:
    return parse_yaml(read_text(path))
