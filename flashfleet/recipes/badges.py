"""Verification badge of a render: the measured cell, a measured variant, or Not Verified."""

from __future__ import annotations

from typing import Any

from flashfleet.catalog import NOT_VERIFIED, badge_catalog
from flashfleet.recipes.options import Options
from flashfleet.recipes.rules import Context


def changed_options(effective: Options, cell: Options) -> dict[str, Any]:
    base = cell.as_dict()
    return {k: v for k, v in effective.as_dict().items() if base[k] != v}


def badge_for(ctx: Context, cell: Options) -> tuple[str, str]:
    """(badge, why). Any option moved away from the measured command gives Not Verified."""
    cells, measured = badge_catalog()
    key = (ctx.hardware.id, ctx.strategy, ctx.topology)
    changed = changed_options(ctx.options, cell)
    if not changed:
        for entry in cells:
            if (entry.hardware, entry.strategy, entry.topology) == key:
                return entry.badge, entry.source
        return NOT_VERIFIED, "no measurement recorded for this hardware, strategy and topology"
    for entry in measured:
        if (entry.hardware, entry.strategy, entry.topology) == key and entry.options == changed:
            return entry.badge, entry.source
    names = ", ".join(sorted(changed))
    return NOT_VERIFIED, f"changed from the measured command: {names}"
