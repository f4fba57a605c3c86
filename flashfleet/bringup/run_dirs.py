"""Where run directories live: `$FLASHFLEET_RUNS_DIR`, else `./.runner`. Light on purpose:
`status`, `bench` and the provider ask for it without loading the runner."""

from __future__ import annotations

import os
from pathlib import Path

RUNS_ENV = "FLASHFLEET_RUNS_DIR"


def default_runs_root() -> Path:
    return Path(os.environ.get(RUNS_ENV) or Path.cwd() / ".runner").resolve()
