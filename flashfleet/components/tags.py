"""Tags every flashfleet cloud resource carries, and the rules that read them back.

Defined once here: the Pulumi components write them, ``flashfleet sweep`` and the node's TTL
guard read them. This module imports only the standard library (sweep and the CLI stay light).

Ownership and staleness are decided from these tags alone, never from local files:
- a resource is flashfleet's when it carries ``flashfleet:managed-by`` with exactly the value
  ``flashfleet``, or (resources made before that tag existed) no ``flashfleet:managed-by`` at all
  and both ``flashfleet:stack`` and ``flashfleet:expires-at`` with well-formed values. A
  ``managed-by`` of any other value (``terraform``, ``""``, ``"flashfleet "``, ``Flashfleet``)
  says another owner: not ours, whatever else it carries. An empty or malformed value is not
  evidence;
- it is expired when ``flashfleet:expires-at`` is an absolute UTC timestamp in the canonical
  form ``2026-11-29T18:00:00Z`` (see ``EXPIRY_FORMAT``) that has passed. Anything else (a
  relative date, a local time, an offset, a typo) is unreadable, and unreadable never expires.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

STACK_TAG = "flashfleet:stack"
EXPIRES_TAG = "flashfleet:expires-at"
ROLE_TAG = "flashfleet:role"
MANAGED_BY_TAG = "flashfleet:managed-by"
MANAGED_BY = "flashfleet"
# A cache that outlives its stack (an EBS snapshot of the weights): what it holds is in
# flashfleet.components.weights_cache's tags; sweep judges it by its expiry alone.
CACHE_TAG = "flashfleet:cache"

# The one form an expiry may take, for sweep (Python) and the TTL guard on the node alike.
# Always read with re.fullmatch: with re.match, ``$`` also accepts a trailing newline.
EXPIRY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
EXPIRY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
# A Pulumi stack name (letters, digits, '-', '_', '.'); anything else is not one of our stacks.
STACK_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


def tag_map(items: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """An AWS API's ``[{"Key": ..., "Value": ...}]`` tag list as a mapping (none: empty)."""
    return {t["Key"]: t["Value"] for t in items or ()}


def iso_utc(moment: datetime) -> str:
    """``2026-11-29T18:00:00Z``: ISO 8601, UTC, whole seconds (needs an aware datetime)."""
    if moment.tzinfo is None:
        raise ValueError("expiry times must be timezone-aware")
    return moment.astimezone(UTC).strftime(EXPIRY_FORMAT)


def parse_expiry(text: str) -> datetime:
    """The moment an ``EXPIRY_FORMAT`` value names; ValueError for anything else."""
    if not re.fullmatch(EXPIRY_PATTERN, text):
        raise ValueError(f"{text!r} is not an absolute UTC time like 2026-11-29T18:00:00Z")
    return datetime.strptime(text, EXPIRY_FORMAT).replace(tzinfo=UTC)


def valid_stack(text: str | None) -> bool:
    return text is not None and re.fullmatch(STACK_PATTERN, text) is not None


def valid_expiry(text: str | None) -> bool:
    try:
        return text is not None and parse_expiry(text) is not None
    except ValueError:
        return False


def is_ours(tags: Mapping[str, str]) -> bool:
    """Owned by flashfleet, by the evidence the resource carries (see the module docstring)."""
    managed = tags.get(MANAGED_BY_TAG)
    if managed is not None:  # another value names another owner, whatever else is there
        return managed == MANAGED_BY
    return valid_stack(tags.get(STACK_TAG)) and valid_expiry(tags.get(EXPIRES_TAG))


def fully_ours(tags: Mapping[str, str]) -> bool:
    """Ours and carrying both a well-formed ``flashfleet:stack`` and ``flashfleet:expires-at``,
    as everything flashfleet makes does: what a container another tool could also fill (an IAM
    instance profile) must show before flashfleet takes anything out of it."""
    return is_ours(tags) and valid_stack(tags.get(STACK_TAG)) and valid_expiry(tags.get(EXPIRES_TAG))


def base_tags(stack: str, expires_at: str, name: str) -> dict[str, str]:
    parse_expiry(expires_at)  # never write a tag that sweep or the guard would refuse to read
    return {"Name": name, MANAGED_BY_TAG: MANAGED_BY, STACK_TAG: stack, EXPIRES_TAG: expires_at}


def static_tags(stack: str) -> dict[str, str]:
    """Tags that never change over a stack's life (launch-template tag specifications)."""
    return {MANAGED_BY_TAG: MANAGED_BY, STACK_TAG: stack}
