"""The scheduler's verdict on a stack's pods, read from the pods as the API server returns them.

The provider awaits a serving workload until its timeout (hours: the download and the load take
that long) and says only that it "does not have minimum availability". A pod the scheduler cannot
place, though, says why on its PodScheduled condition at once: `flashfleet up` ends there, with
the pod's name and that reason (flashfleet.cli.shared.pending_watch). A verdict must stand for a
grace period first: the scheduler retries, and a cluster autoscaler may be adding a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Unschedulable:
    pod: str  # namespace/name
    message: str  # the scheduler's, e.g. "0/2 nodes are available: 2 Insufficient amd.com/gpu."
    since: datetime

    def line(self) -> str:
        return f"pod {self.pod} cannot be scheduled: {self.message}"


def unschedulable(pods: Iterable[Mapping[str, Any]], now: datetime, grace_s: float) -> list[Unschedulable]:
    """Pods the scheduler has refused for at least ``grace_s`` seconds (pods being deleted aside)."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
                continue
            if cond.get("reason") != "Unschedulable" or not cond.get("lastTransitionTime"):
                continue
            since = datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
            if (now - since).total_seconds() >= grace_s:
                name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
                out.append(Unschedulable(name, str(cond.get("message", "")).strip(), since))
    return sorted(out, key=lambda u: u.pod)
