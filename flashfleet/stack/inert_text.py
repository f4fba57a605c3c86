"""Free text of a stack or a lock: one printable line that no template engine would evaluate.

Every string of a stack spec and a lock (keys included: a lock's file and repository names,
a stack's launch option names) reaches an argv, a unit file, a Kubernetes object or Ansible's
inventory. The inventory marks them unsafe (flashfleet.bringup.inert_vars), so Ansible never
runs them; these rules make a stack or lock that carries one anyway fail at `validate`, where the
user can fix it, instead of reaching the nodes as odd literal text. Refused: Jinja's markers
(`{{`, `{%`, `{#`) and any character that is not printable (control characters, line breaks,
tabs, Unicode separators), which would split a unit file's line or an argument.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

TEMPLATE_MARKERS = ("{{", "{%", "{#")

Path = tuple[str | int, ...]


def why_not_inert(text: str) -> str | None:
    """Why `text` may not be a stack's or a lock's string, None when it may."""
    if any(mark in text for mark in TEMPLATE_MARKERS):
        return "holds a template marker ({{, {% or {#): Ansible would evaluate it on the controller"
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        return f"holds a control or non-printing character ({bad!r}): one line of printable text only"
    return None


def _strings(data: Any, at: Path) -> Iterator[tuple[Path, str]]:
    stack: list[tuple[Path, Any]] = [(at, data)]
    seen: set[int] = set()  # an alias shares a node: check it once
    while stack:  # iterative: a deep document must not exhaust the recursion limit
        where, node = stack.pop()
        if isinstance(node, str):
            yield where, node
        elif isinstance(node, Mapping | list) and id(node) not in seen:
            seen.add(id(node))
            if isinstance(node, Mapping):
                for key, value in node.items():
                    if isinstance(key, str):
                        yield (*where, key), key
                    stack.append(((*where, str(key)), value))
            else:
                stack.extend(((*where, i), item) for i, item in enumerate(node))


def all_not_inert(data: Any) -> list[tuple[Path, str]]:
    """Every refused string of `data`, in document order of paths."""
    hits = [(where, why_not_inert(text)) for where, text in _strings(data, ())]
    return sorted(((w, y) for w, y in hits if y is not None), key=lambda hit: [str(p) for p in hit[0]])


def path_text(where: Path) -> str:
    """A path as a YAML path (`weights.org/repo.files[0]`), each part shown safely: a key that is
    itself refused is printed as its repr, never as raw text on the user's terminal."""
    out = ""
    for part in where:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            shown = part if why_not_inert(part) is None else repr(part)
            out += f".{shown}" if out else shown
    return out
