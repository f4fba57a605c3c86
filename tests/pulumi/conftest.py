import sys
from pathlib import Path

import pytest

# pulumi_harness is a plain module beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
# ...and the tests folder, for the dynamic-provider host of tests/bringup (bringup.engine).
sys.path.insert(1, str(Path(__file__).parents[1]))


@pytest.fixture(autouse=True)
def no_namespace_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under mocks there is no cluster: the namespace a Kubernetes stack creates is not there yet
    (tests that need one patch the read again)."""
    monkeypatch.setattr("flashfleet.k8s.namespace_owner.read_namespace", lambda context, namespace: None)
