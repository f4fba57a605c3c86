"""Verification badge of a render: the measured cell, a measured variant, or Not Verified."""

from __future__ import annotations

from typing import Any

from flashfleet.catalog import NOT_VERIFIED, badge_catalog
from flashfleet.recipes.cluster import ROUTER_NAMES, describe
from flashfleet.recipes.options import Options
from flashfleet.recipes.rules import Context


def changed_options(effective: Options, cell: Options) -> dict[str, Any]:
    base = cell.as_dict()
    return {k: v for k, v in effective.as_dict().items() if base[k] != v}


# What a cluster changes by its shape alone: the instance counts, the router, and the per-instance
# sizes that follow from them.
_SHAPE = {"replicas", "prefill", "decode", "router_policy", "tp", "nodes"}


def badge_for(ctx: Context, cell: Options) -> tuple[str, str]:
    """(badge, why). Any option moved away from the measured command gives Not Verified."""
    cells, measured = badge_catalog()
    key = (ctx.hardware.id, ctx.strategy, ctx.topology)
    changed = changed_options(ctx.options, cell)
    shape = describe(ctx.options)
    if shape:
        # The seed validated one instance of each layout (PD as one node's pair): a cluster of
        # them behind the router is a starting point, never a measurement.
        others = sorted(set(changed) - _SHAPE)
        also = f"; also changed from the measured command: {', '.join(others)}" if others else ""
        pair = " (one node: prefill + decode)" if ctx.topology == "pd" else ""
        return NOT_VERIFIED, (
            f"{shape} behind {ROUTER_NAMES[ctx.options.router]} ({ctx.options.router_policy}) was not "
            f"validated: the seed measured one {ctx.topology} instance{pair}{also}"
        )
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
