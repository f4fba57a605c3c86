"""Tags every flashfleet resource carries (``flashfleet sweep`` finds leftovers by them)."""

from __future__ import annotations

from datetime import UTC, datetime

STACK_TAG = "flashfleet:stack"
ROLE_TAG = "flashfleet:role"
EXPIRES_TAG = "flashfleet:expires-at"  # read on the node by the TTL guard, by `flashfleet sweep` here


def iso_utc(moment: datetime) -> str:
    """``2026-11-29T18:00:00Z``: ISO 8601, UTC, whole seconds (needs an aware datetime)."""
    if moment.tzinfo is None:
        raise ValueError("expiry times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def base_tags(stack: str, expires_at: str, name: str) -> dict[str, str]:
    return {"Name": name, STACK_TAG: stack, EXPIRES_TAG: expires_at}
