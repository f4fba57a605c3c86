"""Whether the cluster's nodes can hold a stack's server pods, by GPUs, read from the nodes as the
API server returns them (`flashfleet up` asks before anything is applied).

A node counts for the stack's pool when it is schedulable, carries every label of the pool's
nodeSelector, and every NoSchedule or NoExecute taint on it is tolerated by the pool. It holds
as many server pods as its allocatable GPUs divide by one pod's: the check never refuses what
the GPUs allow (CPU and memory are the scheduler's to judge, and `up`'s pending watch reports
its verdict). A pool whose GPUs come through DRA has no GPU count on its nodes: not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flashfleet.k8s.containers import GPU_RESOURCES
from flashfleet.k8s.manifests import KubernetesPlan
from flashfleet.stack.kubernetes_source import NodePool, Toleration

_BLOCKING = ("NoSchedule", "NoExecute")


def _tolerates(tolerations: Iterable[Toleration], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.effect is not None and t.effect != taint.get("effect"):
            continue
        if t.key is None:  # with operator Exists: every taint
            return True
        if t.key == taint.get("key") and (t.operator == "Exists" or t.value == taint.get("value", "")):
            return True
    return False


def _in_pool(node: Mapping[str, Any], pool: NodePool) -> bool:
    spec, labels = node.get("spec") or {}, (node.get("metadata") or {}).get("labels") or {}
    if spec.get("unschedulable"):
        return False
    if any(labels.get(k) != v for k, v in pool.node_selector.items()):
        return False
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in _BLOCKING]
    return all(_tolerates(pool.tolerations, t) for t in taints)


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    return int(str(((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")))


def refusal(
    plan: KubernetesPlan, pool: NodePool, vendor: str, nodes: Iterable[Mapping[str, Any]]
) -> str | None:
    """Why the cluster's nodes cannot hold the stack's server pods by GPUs, or None."""
    if pool.gpu_device_class is not None:
        return None
    resource = GPU_RESOURCES[vendor]
    wanted = plan.server_pod_gpus
    if not wanted:
        return None
    per_pod = max(wanted)
    offers = {n["metadata"]["name"]: _allocatable(n, resource) for n in nodes if _in_pool(n, pool)}
    holds = sum(gpus // per_pod for gpus in offers.values())
    if holds >= len(wanted):
        return None
    where = f"nodeSelector {dict(pool.node_selector)}" if pool.node_selector else "no nodeSelector"
    pods = f"{len(wanted)} server pod(s) of {per_pod} {resource}"
    if not offers:
        return (
            f"no schedulable node of the cluster matches the pool ({where}, and taints its "
            f"tolerations answer): {pods} have nowhere to run"
        )
    seen = ", ".join(f"{name}: {gpus}" for name, gpus in sorted(offers.items()))
    return f"the pool's nodes ({where}) hold {holds} of the {pods}; allocatable {resource} per node: {seen}"
