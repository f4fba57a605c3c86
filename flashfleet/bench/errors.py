"""The benchmark's refusals, raised by the session and by the cluster it measures alike."""

from __future__ import annotations


class BenchSetupError(Exception):
    """The request cannot be carried out as given (nothing was run)."""
