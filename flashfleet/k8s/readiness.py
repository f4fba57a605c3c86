"""Is a Kubernetes stack serving, from its workloads as the API server holds them (`flashfleet
status`): nothing answers HTTP from where flashfleet runs (a ClusterIP Service), but the cluster
knows which pods are Ready.

A workload counts as ready when its own status says so (readyReplicas equal to replicas) and,
for a LeaderWorkerSet, when every pod of its groups is there and Ready: the controller updates
the set's status only after it has seen a pod go, while the pod itself is gone at once. So a
group that lost a worker is named not ready from that moment until the controller has brought
the whole group back.

Pure: the objects come in as dicts (flashfleet/cli/shared/cluster_api.py reads them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from flashfleet.k8s import names
from flashfleet.k8s.manifests import KubernetesPlan

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"  # the controller's label on each pod of a set
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")  # a Service may share the name


class WorkloadReadiness(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    instance: str  # a cluster's instance (prefill-0, router), else the workload's component
    ready: bool
    why: str  # "ready", or what is missing


class KubernetesHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    namespace: str
    workloads: tuple[WorkloadReadiness, ...]

    @property
    def not_ready(self) -> list[WorkloadReadiness]:
        return [w for w in self.workloads if not w.ready]

    @property
    def state(self) -> str:
        down = {w.instance for w in self.not_ready}
        if not down:
            return "serving"
        if "router" in down or len(down) == len(self.workloads):
            return "down"  # the router is the endpoint; with nothing else, nothing serves
        for role in ("prefill", "decode"):  # PD: a side with no instance up serves no request
            mine = {w.instance for w in self.workloads if w.instance.startswith(f"{role}-")}
            if mine and mine <= down:
                return "down"
        return "degraded"

    def line(self) -> str:
        total, bad = len(self.workloads), self.not_ready
        if not bad:
            return f"endpoint: serving: {total} of {total} workloads ready in namespace {self.namespace}"
        named = "; ".join(f"{w.instance} ({w.kind} {self.namespace}/{w.name}: {w.why})" for w in bad)
        return f"endpoint: {self.state}: {total - len(bad)} of {total} workloads ready; not ready: {named}"


def _ready_pods(pods: Iterable[Mapping[str, Any]]) -> int:
    def ready(pod: Mapping[str, Any]) -> bool:
        if "deletionTimestamp" in pod.get("metadata", {}):
            return False
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    return sum(ready(p) for p in pods)


def _judge(obj: Mapping[str, Any] | None, kind: str, pods: list[Mapping[str, Any]]) -> tuple[bool, str]:
    if obj is None:
        return False, "not found"
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    want, ready = int(spec.get("replicas", 1)), int(status.get("readyReplicas") or 0)
    if kind != "LeaderWorkerSet":
        return ready >= want, "ready" if ready >= want else f"{ready} of {want} replicas ready"
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
    pods_ready = _ready_pods(pods)
    if ready >= want and pods_ready >= want * size:
        return True, "ready"
    return False, f"{ready} of {want} groups ready, {pods_ready} of {want * size} pods ready"


def health(
    plan: KubernetesPlan,
    objects: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
) -> KubernetesHealth:
    """The plan's serving workloads judged from ``objects`` (the namespace's Deployments,
    StatefulSets and LeaderWorkerSets, each with its ``kind``) and ``pods``."""
    rendered = {o["metadata"]["name"]: o for o in plan.objects if o["kind"] in WORKLOAD_KINDS}
    found = {o["metadata"]["name"]: o for o in objects}
    pod_list = list(pods)
    out = []
    for name in plan.workloads:
        kind = rendered[name]["kind"]
        labels = rendered[name]["metadata"].get("labels", {})
        instance = labels.get(names.LABEL_CLUSTER_INSTANCE) or labels.get(names.LABEL_COMPONENT, name)
        mine = [p for p in pod_list if p.get("metadata", {}).get("labels", {}).get(LWS_NAME) == name]
        ready, why = _judge(found.get(name), kind, mine)
        out.append(WorkloadReadiness(name=name, kind=kind, instance=instance, ready=ready, why=why))
    return KubernetesHealth(namespace=plan.namespace, workloads=tuple(out))
