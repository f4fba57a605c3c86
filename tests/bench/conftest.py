"""Fixtures: the stand-in server, the oracle interpreter (real sglang 0.5.23), tiny profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flashfleet.bench.profiles import Profile
from flashfleet.bench.runner import LocalRunner
from tests.serve.standin_sglang import StandinServer

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
ORACLE_SITE = Path(__file__).with_name("oracle_site")


@pytest.fixture
def standin() -> Iterator[StandinServer]:
    with StandinServer() as server:
        yield server


@pytest.fixture
def oracle_runner() -> LocalRunner:
    """Runs the driver's argv unchanged with the oracle venv's sglang (see oracle_site/)."""
    assert ORACLE.exists(), f"oracle venv missing: run scripts/setup.d/10-sglang-oracle.sh ({ORACLE})"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(ORACLE_SITE)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"  # loopback only, never via a proxy
    return LocalRunner(base_env=env)


def tiny(profile: Profile, *, concurrency: tuple[int, ...] = (1, 2), requests: int = 4) -> Profile:
    """The same profile with a few short requests: seconds, not hours."""
    args = dict(profile.args)
    for key in ("random-input-len", "gsp-system-prompt-len", "gsp-question-len"):
        if key in args:
            args[key] = 16
    for key in ("random-output-len", "gsp-output-len"):
        if key in args:
            args[key] = 8
    for key, value in (("gsp-num-groups", 2), ("gsp-prompts-per-group", 2)):
        if key in args:
            args[key] = value
    args["warmup-requests"] = 1
    args["ready-check-timeout-sec"] = 10
    small = profile.with_overrides(concurrency=concurrency, num_prompts=requests)
    return Profile(**{**small.__dict__, "args": args, "timeout_s": 120.0})
