"""Prints how long each engine step of the end-to-end tests took (CI keeps the total in view)."""

from __future__ import annotations

from typing import Any

TIMINGS: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.section("e2e: Pulumi engine steps")
        for step, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{step}: {seconds:.1f} s")
