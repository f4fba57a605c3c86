"""Capacity facts the offline layers need: the placeholder id and a block's usable window.

AWS begins terminating the instances of a Capacity Block 30 minutes before the block ends
("Thirty minutes before the reservation expires, we begin to terminate any instances that are
still running in the Capacity Block": EC2 User Guide, Work with Capacity Blocks). A node's
flashfleet:expires-at therefore never passes ``end - BLOCK_END_MARGIN``: the TTL guard shuts it
down cleanly before AWS reclaims it, and `ttl: block` means exactly that moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from flashfleet.stack.spec import BLOCK_TTL, AwsSource, CapacityBlock, StackSpec

PLACEHOLDER_RESERVATION = "cr-00000000000000000"
BLOCK_END_MARGIN = timedelta(minutes=30)
# The longest Capacity Block EC2 sells (EC2's rule for CapacityDurationHours in
# DescribeCapacityBlockOfferings: whole days up to 14 days, then whole weeks up to 182 days).
MAX_BLOCK = timedelta(days=182)


def reservation_id(spec: StackSpec) -> str | None:
    """The reservation the stack's instances must land in (block or ODCR), or None."""
    src = spec.nodes.source
    if isinstance(src, AwsSource) and src.capacity.kind != "on-demand":
        return src.capacity.reservation_id
    return None


def needs_purchase(spec: StackSpec) -> bool:
    """A block stack that still carries the placeholder id: `flashfleet capacity buy` comes first."""
    return reservation_id(spec) == PLACEHOLDER_RESERVATION


def block(spec: StackSpec) -> CapacityBlock | None:
    src = spec.nodes.source
    if isinstance(src, AwsSource) and isinstance(src.capacity, CapacityBlock):
        return src.capacity
    return None


def usable_until(end: datetime) -> datetime:
    """The last moment a block's instances are ours (AWS starts terminating them after it)."""
    return end - BLOCK_END_MARGIN


def node_deadline(spec: StackSpec, now: datetime, block_end: datetime | None) -> datetime:
    """flashfleet:expires-at for nodes created now: the TTL, never past the block's usable end."""
    if spec.ttl == BLOCK_TTL:
        if block_end is None:
            raise ValueError("ttl: block needs the block's end date")
        return usable_until(block_end)
    assert isinstance(spec.ttl, timedelta)
    deadline = now + spec.ttl
    return deadline if block_end is None else min(deadline, usable_until(block_end))
