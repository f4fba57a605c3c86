"""Simulated GPU nodes shaped like a stack's node pool: its labels, its taints, its architecture,
and the GPU, CPU, memory and RDMA capacity one server pod of it needs."""

from __future__ import annotations

import json
from typing import Any

from control_plane import ControlPlane

from flashfleet.catalog import hardware_catalog
from flashfleet.k8s.containers import GPU_RESOURCES
from flashfleet.stack.kubernetes_source import KubernetesSource, NodePool

ARCH = {"arm64": "arm64", "x86_64": "amd64"}  # the catalog's names -> kubernetes.io/arch
# What a node keeps besides one server pod: the pre-pull pod, a download Job's, the router's.
HEADROOM_CPU, HEADROOM_GIB = 16, 64


def taints(pool: NodePool) -> list[dict[str, str]]:
    """The taints the pool's tolerations are written for (an Exists toleration: any value)."""
    out = []
    for t in pool.tolerations:
        if t.key is None:
            continue
        taint = {"key": t.key, "effect": t.effect or "NoSchedule"}
        if t.operator == "Equal" and t.value:
            taint["value"] = t.value
        out.append(taint)
    return out


def add_pool_nodes(
    cp: ControlPlane,
    source: KubernetesSource,
    hardware: str,
    count: int,
    *,
    prefix: str,
    gpus: int | None = None,
    cpu: int | None = None,
) -> list[str]:
    """``count`` nodes of the stack's pool for ``hardware``, each with the hardware's GPUs (or
    ``gpus``) and room for one server pod (or ``cpu`` cores); a pool with a DRA device class gets
    its GPUs as a ResourceSlice instead."""
    hw = hardware_catalog()[hardware]
    pool = source.node_pools[hardware]
    n_gpus = hw.gpus_per_node if gpus is None else gpus
    capacity = {
        "cpu": str(pool.server_resources.cpu + HEADROOM_CPU if cpu is None else cpu),
        "memory": f"{pool.server_resources.memory_gib + HEADROOM_GIB}Gi",
        GPU_RESOURCES[hw.vendor]: str(n_gpus),
        **{k: str(v) for k, v in pool.rdma_resources.items()},
    }
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        cp.add_node(
            name, arch=ARCH[hw.arch], labels=pool.node_selector, taints=taints(pool), capacity=capacity
        )
        if pool.gpu_device_class:
            _resource_slice(cp, name, pool.gpu_device_class, n_gpus)
    if pool.gpu_device_class:
        _device_class(cp, pool.gpu_device_class)
    return names


def add_plain_node(cp: ControlPlane, name: str) -> None:
    """A CPU node with no GPU, label or taint: nothing of a GPU stack belongs on it."""
    cp.add_node(name, arch="amd64", labels={}, taints=[], capacity={"cpu": "64", "memory": "256Gi"})


def _device_class(cp: ControlPlane, name: str) -> None:
    """The DRA device class the driver would install: every device the driver publishes."""
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
    }
    cp.apply([obj])


def _resource_slice(cp: ControlPlane, node: str, driver: str, gpus: int) -> None:
    """The node's GPUs as its DRA driver publishes them."""
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(gpus)],
        },
    }
    cp.kubectl("create", "-f", "-", stdin=json.dumps(obj))


def provision_claims(cp: ControlPlane, objects: list[dict[str, Any]]) -> list[str]:
    """A statically provisioned volume for each claim, of its class, size and access mode, as a
    cluster's admin (or its CSI driver) would have made; the real PV controller binds them."""
    made = []
    for claim in (o for o in objects if o["kind"] == "PersistentVolumeClaim"):
        spec, name = claim["spec"], f"pv-{claim['metadata']['name']}"
        cp.apply([
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": spec["storageClassName"]},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"},
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
             "spec": {"capacity": spec["resources"]["requests"], "accessModes": spec["accessModes"],
                      "storageClassName": spec["storageClassName"], "hostPath": {"path": f"/volumes/{name}"}}},
        ])  # fmt: skip
        made.append(name)
    return made
