"""What the helper containers may do: the weights downloads, a cluster's router, the Mooncake
master and the pre-pull pods need no privilege, so they get none (docs/security.md,
"Kubernetes").

The downloads run as root: they write into the model cache (a hostPath or claim the kubelet
makes root-owned) and the client's venv; root there gains nothing once every capability is
dropped and no process can gain more. The router and the Mooncake master run their image's
user, which the image does not promise to be non-root. The pre-pull pods run `true` and the
pause image, as nobody. The GPU servers keep their own context (flashfleet.k8s.containers):
they run as root, as SGLang's images and their device access (the GPUs, RDMA, shared memory)
expect.
"""

from __future__ import annotations

from typing import Any

NOBODY = 65534


def restricted() -> dict[str, Any]:
    """No privilege escalation, every capability dropped, the runtime's default seccomp."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_non_root() -> dict[str, Any]:
    """`restricted`, as nobody: for containers that only run `true` or sleep."""
    return {**restricted(), "runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY}
