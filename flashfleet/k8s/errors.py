"""Why a recipe cannot run on a Kubernetes source as described."""

from __future__ import annotations


class KubernetesRenderError(ValueError):
    """A stack that cannot be rendered for Kubernetes; ``field`` is where to fix it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
