"""One rule for every catalog file: a table holds exactly the keys its loader reads.

A key no loader reads is a typo (`imex` spelt `imx`) or a figure nothing uses, and either way the
catalog would say something the product does not do; it is refused, naming the file, the table
and the key, where an unread key was silently ignored before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, fields
from typing import Any


class CatalogError(ValueError):
    """A catalog file that does not hold what its loader reads."""


def table(raw: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> Mapping[str, Any]:
    """`raw`, once it is a table with every required key and no key beyond `optional`."""
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be a table")
    required = tuple(required)
    known = {*required, *optional}
    if unknown := sorted(set(raw) - known):
        raise CatalogError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    if missing := [key for key in required if key not in raw]:
        raise CatalogError(f"{where}: missing key {missing[0]!r}")
    return raw


def of(
    cls: type, where: str, raw: Any, *, skip: Iterable[str] = (), optional: Iterable[str] = ()
) -> Mapping[str, Any]:
    """`table` for a dataclass's fields, less `skip` (set by the loader, not the file): a field
    with a default, or named in `optional`, may be left out."""
    skipped, also = set(skip), set(optional)
    names = [f for f in fields(cls) if f.name not in skipped]
    required = [
        f.name for f in names if f.default is MISSING and f.default_factory is MISSING and f.name not in also
    ]
    return table(raw, where, required, [f.name for f in names] + sorted(also - {f.name for f in names}))
