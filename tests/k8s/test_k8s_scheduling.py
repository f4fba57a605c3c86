"""The scheduler's verdict as `flashfleet up` reads it from a stack's pods (the real scheduler's
own: tests/k8s/cluster/test_pulumi_up.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from flashfleet.k8s.scheduling import unschedulable

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
MESSAGE = "0/2 nodes are available: 2 Insufficient amd.com/gpu. preemption: 0/2 nodes are available."


def pod(
    name: str, *, ago_s: float | None, reason: str = "Unschedulable", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "glm"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T11:59:00Z"
    conds = []
    if ago_s is not None:
        at = (NOW - timedelta(seconds=ago_s)).isoformat().replace("+00:00", "Z")
        conds.append({"type": "PodScheduled", "status": "False", "reason": reason, "message": MESSAGE,
                      "lastTransitionTime": at})  # fmt: skip
    return {"metadata": meta, "status": {"phase": "Pending", "conditions": conds}}


def test_a_verdict_that_stood_for_the_grace_names_the_pod_and_the_reason() -> None:
    (found,) = unschedulable([pod("serve-1", ago_s=130)], NOW, grace_s=120)
    assert found.line() == f"pod glm/serve-1 cannot be scheduled: {MESSAGE}"


def test_a_fresh_verdict_waits_out_the_grace() -> None:
    assert unschedulable([pod("serve-1", ago_s=30)], NOW, grace_s=120) == []


def test_scheduled_pods_pods_being_deleted_and_other_reasons_are_not_refusals() -> None:
    scheduled = pod("a", ago_s=None)
    scheduled["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    pods = [scheduled, pod("b", ago_s=500, deleting=True), pod("c", ago_s=500, reason="SchedulingGated")]
    assert unschedulable(pods, NOW, grace_s=0) == []


def test_every_refused_pod_in_name_order() -> None:
    found = unschedulable([pod("replica-1", ago_s=200), pod("replica-0", ago_s=200)], NOW, grace_s=60)
    assert [f.pod for f in found] == ["glm/replica-0", "glm/replica-1"]
