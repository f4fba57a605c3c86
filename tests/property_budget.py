"""How many examples a property test draws: its own count in the full suite (`scripts/test.sh`,
or plain pytest), a quarter of it, at least 10, in the fast tier (`scripts/test.sh --fast` sets
FLASHFLEET_FAST_TIER=1). Hypothesis keeps each failing example in .hypothesis/ and replays it
first in either tier, so a failure found once is never skipped by the smaller count."""

from __future__ import annotations

import os

FAST_TIER = os.environ.get("FLASHFLEET_FAST_TIER") == "1"


def budget(full: int) -> int:
    return max(10, full // 4) if FAST_TIER else full
