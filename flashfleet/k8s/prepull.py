"""Pre-pull: the serving image onto the serving nodes while the weights download.

A DaemonSet with the servers' placement (nodeSelector, tolerations): its init container runs the
serving image with a trivial command, so the kubelet of every node that may serve starts pulling
that image as soon as the DaemonSet exists; a pause container then keeps the pod. It is right for
both cache modes, where a per-server-pod mechanism is not:

- ReadWriteMany: the servers are created only after the download Job completes, so nothing of
  theirs could pull during the download; the DaemonSet is created with the Job, not after it.
- Node-local cache: a pod's init containers start one after another and each image is pulled
  when its container starts, so an extra container in the server pod would pull either before
  the downloads (serial again) or after them. The DaemonSet pod pulls beside them.

The servers never wait for it (the component skips its await): when the server container starts
the image is there, or the runtime finishes the pull already in progress. Which pool node the
scheduler picks is not known in advance, so every node of the pool pulls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flashfleet.k8s import names, resources
from flashfleet.k8s.pod_security import restricted_non_root

POD = "prepull"
# Requests so small the pod fits beside anything; no GPU, no volume, no token.
_TINY = resources.PRE_PULL


def pre_pull(
    stack: str, namespace: str, images: Sequence[str], pause_image: str, placement: dict[str, Any]
) -> dict[str, Any]:
    """The DaemonSet that pulls ``images`` (the serving images) on the serving node pool."""
    lbl = names.labels(stack, POD)
    pod_labels = {**lbl, **names.selector(stack, POD)}
    pulls = [
        {
            "name": f"pull-{i}",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["true"],  # pulling is the point; the image's own entrypoint is not
            "resources": _TINY,
            "securityContext": restricted_non_root(),
        }
        for i, image in enumerate(images)
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": names.metadata(names.pre_pull(stack), namespace, lbl),
        "spec": {
            "selector": {"matchLabels": names.selector(stack, POD)},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "initContainers": pulls,
                    "containers": [
                        {
                            "name": "pause",
                            "image": pause_image,
                            "imagePullPolicy": "IfNotPresent",
                            "resources": _TINY,
                            "securityContext": restricted_non_root(),
                        }
                    ],
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 0,
                    **placement,
                },
            },
        },
    }
