import sys
from pathlib import Path

import pytest

# ec2_api (the stubbed client) beside these tests; the Pulumi program runner from tests/pulumi.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "pulumi"))


@pytest.fixture(autouse=True)
def runs_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A purchase's record goes under the runs folder: a fresh one per test, outside the stacks'
    folder (never ./.runner of the checkout)."""
    runs = tmp_path_factory.mktemp("runs")
    monkeypatch.setenv("FLASHFLEET_RUNS_DIR", str(runs))
    return runs
