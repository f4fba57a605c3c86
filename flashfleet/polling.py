"""Asking again until an answer is good or time is up, every few seconds: flashfleet's poll loop.

Standard library only, so any part may use it (the host-key read, the wait for a server). The
clock and the sleep are passed in so a test runs the loop without waiting. Not a poll: the wait
for a capacity reservation's start (capacity.reservation.check_or_wait), which sleeps until a
known time and has no timeout.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def poll(
    attempt: Callable[[], T],
    until: Callable[[T], bool],
    *,
    timeout_s: float,
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``attempt`` now and every ``interval_s`` until ``until(answer)`` holds; the last answer.

    No attempt starts after ``timeout_s`` from now: when the next one would, the last answer is
    returned as it is (the caller tells a good answer from a late one with ``until``)."""
    deadline = clock() + timeout_s
    while True:
        answer = attempt()
        if until(answer) or clock() + interval_s > deadline:
            return answer
        sleep(interval_s)


def http_get(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> tuple[int, str]:
    """What a poll of a server asks: (status, body) of one GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=dict(headers or {})), timeout=timeout_s
        ) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        return 0, str(getattr(err, "reason", err))
