"""Kubernetes sources and stacks the tests render: GB300 low latency, MI355X AgentX, PD, L3, and
clusters (replicas, PD across nodes, multi-node replicas, encoder-disaggregated replicas)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flashfleet.k8s import KubernetesPlan, plan_kubernetes
from flashfleet.launch import LaunchSettings
from flashfleet.recipes import Recipe
from flashfleet.recipes.render import render
from flashfleet.stack.image import ImageSpec
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.spec import Mooncake

POOLS: dict[str, Any] = {
    "gb300": {
        "serverResources": {"cpu": 128, "memoryGib": 800},
        "nodeSelector": {"node.kubernetes.io/instance-type": "p6e-gb300.36xlarge"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "gpuDeviceClass": "gpu.nvidia.com",
    },
    "h200": {
        "serverResources": {"cpu": 180, "memoryGib": 1800},
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "rdmaResources": {"vpc.amazonaws.com/efa": 16},
        "gpuDeviceClass": "gpu.nvidia.com",
    },
    "mi355x": {
        "serverResources": {"cpu": 96, "memoryGib": 1200},
        "nodeSelector": {"amd.com/gpu.product-name": "AMD_Instinct_MI355X"},
        "tolerations": [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
PVC = {"kind": "pvc", "storageClass": "fsx-lustre", "size": "2Ti"}
HOST_PATH = {"kind": "hostPath", "path": "/mnt/nvme/hf-cache"}
L3_MOONCAKE = Mooncake.model_validate({"protocol": "efa", "globalSegmentGib": 256})


def source(**overrides: Any) -> KubernetesSource:
    data: dict[str, Any] = {
        "kind": "kubernetes",
        "namespace": "glm",
        "nodePools": POOLS,
        "modelCache": PVC,
        **overrides,
    }
    return KubernetesSource.model_validate(data)


@dataclass(frozen=True)
class Case:
    stack: str
    hardware: str
    strategy: str
    topology: str = "unified"
    options: Mapping[str, object] = field(default_factory=dict)
    nodes: int = 1
    mooncake: Mooncake | None = None
    source: KubernetesSource = field(default_factory=source)

    def recipe_for(self, addresses: Sequence[str] | None) -> Recipe:
        overrides = {**self.options, "nodes": self.nodes}
        return render(self.hardware, self.strategy, self.topology, overrides, addresses=addresses)

    def settings(self) -> LaunchSettings:
        return LaunchSettings(image=ImageSpec(derived=False, includes=("#42178",)))

    def plan(self) -> KubernetesPlan:
        return plan_kubernetes(
            self.stack,
            self.source,
            hardware=self.hardware,
            nodes=self.nodes,
            recipe_for=self.recipe_for,
            settings=self.settings(),
            mooncake=self.mooncake,
        )


GB300_LOWLAT = Case("gb300-lowlat", "gb300", "low-latency")
MI355X_AGENTX = Case(
    "mi355x-agentx",
    "mi355x",
    "low-latency",
    options={"precision": "mxfp4", "hicache": "l1l2", "hicache_size": 180},
    source=source(modelCache=HOST_PATH),
)
GB300_PD = Case("gb300-pd", "gb300", "high-throughput", topology="pd")
H200_L3 = Case(
    "h200-l3",
    "h200",
    "low-latency",
    options={"hicache": "l1l2l3", "hicache_size": 100},
    nodes=2,
    mooncake=L3_MOONCAKE,
    source=source(leaderWorkerSet=True),
)
H200_L3_STATEFULSETS = Case(
    "h200-l3-sts",
    "h200",
    "low-latency",
    options={"hicache": "l1l2l3", "hicache_size": 100},
    nodes=3,
    mooncake=L3_MOONCAKE,
)
GB300_ENCODER = Case("gb300-encoder", "gb300", "low-latency", topology="encoder-disagg")
H200_DFLASH2 = Case("h200-dflash2", "h200", "low-latency", options={"speculative": "dflash2"})
# Clusters: ``nodes`` is each instance's node count (the recipe's nodes option).
H200_REPLICAS = Case("h200-replicas", "h200", "high-throughput", options={"replicas": 2})
GB300_2P1D = Case(
    "gb300-2p1d", "gb300", "high-throughput", topology="pd", options={"prefill": 2, "decode": 1}
)
H200_REPLICAS_LWS = Case(
    "h200-2x2",
    "h200",
    "high-throughput",
    options={"replicas": 2},
    nodes=2,
    source=source(leaderWorkerSet=True),
)
GB300_ENCODER_REPLICAS = Case(
    "gb300-enc-replicas",
    "gb300",
    "low-latency",
    topology="encoder-disagg",
    options={"replicas": 2},
    source=source(modelCache=HOST_PATH),
)
# Multi-node instances as LeaderWorkerSets (tests/k8s/cluster/test_leader_worker_sets.py): GB300
# tensor parallel 16 over 4 nodes, H200 and MI355X over 2.
GB300_TP16 = Case("gb300-tp16", "gb300", "low-latency", nodes=4, source=source(leaderWorkerSet=True))
H200_LWS = Case("h200-x2", "h200", "low-latency", nodes=2, source=source(leaderWorkerSet=True))
MI355X_LWS = Case("mi355x-x2", "mi355x", "low-latency", nodes=2, source=source(leaderWorkerSet=True))
# PD across nodes with each instance over 2 nodes: one LeaderWorkerSet per instance of each role
GB300_PD_LWS = Case(
    "gb300-pd-x2",
    "gb300",
    "high-throughput",
    topology="pd",
    options={"prefill": 1, "decode": 1},
    nodes=2,
    source=source(leaderWorkerSet=True),
)
CLUSTERS = (H200_REPLICAS, GB300_2P1D, H200_REPLICAS_LWS, GB300_ENCODER_REPLICAS)
ALL = (
    GB300_LOWLAT,
    MI355X_AGENTX,
    GB300_PD,
    H200_L3,
    H200_L3_STATEFULSETS,
    GB300_ENCODER,
    H200_DFLASH2,
    *CLUSTERS,
)


def objects_of(plan: KubernetesPlan, kind: str) -> list[dict[str, Any]]:
    return [o for o in plan.objects if o["kind"] == kind]


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec a workload object carries (LWS: leader and worker templates)."""
    spec = obj.get("spec", {})
    if obj["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    if "template" in spec:
        return [spec["template"]["spec"]]
    return []


def containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Main and init containers by name."""
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}
