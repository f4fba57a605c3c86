"""One real control plane for the folder (tests/conftest.py keeps the folder on one worker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from control_plane import ControlPlane, control_plane, ready


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if not ready():
        pytest.fail(
            "no control plane built: run scripts/setup.d/45-kube.sh and 46-lws.sh (scripts/test.sh runs them)"
        )
    root: Path = tmp_path_factory.mktemp("kube")
    with control_plane(root) as cp:
        yield cp
