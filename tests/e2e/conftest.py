"""Prints how long each engine step of the end-to-end tests took (CI keeps the total in view)."""

from __future__ import annotations

from typing import Any

import pytest

TIMINGS: dict[str, float] = {}


def pytest_sessionfinish(session: pytest.Session) -> None:
    # under pytest-xdist each worker hands its steps to the controller, which prints them all
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["e2e_timings"] = dict(TIMINGS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    TIMINGS.update(getattr(node, "workeroutput", {}).get("e2e_timings", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.section("e2e: Pulumi engine steps")
        for step, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{step}: {seconds:.1f} s")
