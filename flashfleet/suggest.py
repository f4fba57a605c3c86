"""The known name closest to a mistyped one (`pln` -> plan), for refusals to point at.

A leaf any layer may use: it imports nothing of flashfleet."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(value: str, known: Iterable[str]) -> str | None:
    """The known name most like `value` (difflib's ratio, at least 0.6), or None."""
    near = difflib.get_close_matches(value, list(known), n=1, cutoff=0.6)
    return near[0] if near else None


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """'; did you mean NAME?' for the closest known name, or '' when none is close."""
    near = closest(value, known)
    return f"; did you mean {near}?" if near else ""
