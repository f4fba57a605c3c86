"""The error the sizing layer raises for input it cannot size from."""

from __future__ import annotations


class SizingError(ValueError):
    """A boot log, workload or host tier that cannot be sized: one line saying what is wrong.

    A ValueError, so pydantic validators that call into this package report it as a field error.
    """
