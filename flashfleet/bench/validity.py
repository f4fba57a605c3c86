"""Why a level measured nothing worth keeping, and the lines of its log that say why.

A bench_serving run that exits 0 is not yet a result: it may have counted requests whose
answers were empty (0 output tokens, e.g. a KV transfer that never delivered) or dropped
failed requests from its averages. Those levels are refused, whatever the exit status.
"""

from __future__ import annotations

import re

from flashfleet.bench.summary import LevelSummary

TAIL_LINES = 8
# Lines that carry no cause: progress bars, separators, blank lines, the banner of the results.
_NOISE = re.compile(r"^\s*$|^[=\-#* ]+$|it/s\]|s/it\]|^\s*\d+%\|")


def refusal(summary: LevelSummary, expected: int) -> str | None:
    """The reason a parsed level is not a measurement, or None."""
    if summary.completed == 0:
        return "no request succeeded"
    if summary.total_output_tokens <= 0:
        return f"measured nothing: {summary.completed} requests completed with 0 output tokens"
    if summary.total_output_tokens_retokenized == 0:
        # bench_serving's native client counts the requested length when no text streamed back
        return (
            f"measured nothing: {summary.completed} requests came back with no text (0 output tokens; "
            f"bench_serving counted the {summary.total_output_tokens} requested)"
        )
    if summary.completed < expected:
        return f"{expected - summary.completed} of {expected} requests failed"
    return None


def log_tail(log: str, lines: int = TAIL_LINES) -> list[str]:
    """The last meaningful lines of a console log (a Python traceback's last line included)."""
    kept = [ln.rstrip() for ln in log.splitlines() if not _NOISE.search(ln)]
    return kept[-lines:]
