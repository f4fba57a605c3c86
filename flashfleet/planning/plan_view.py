"""The bring-up plan as data: what ``flashfleet plan`` prints (text or JSON), offline.

Addresses are not known before ``pulumi up`` on AWS, so AWS nodes appear as ``node-0``,
``node-1``...; existing hosts show their real addresses. A Kubernetes stack has no hosts: its
plan lists the objects and, per workload, each container's image and command.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flashfleet.k8s import KubernetesPlan
from flashfleet.k8s import mooncake as k8s_mooncake
from flashfleet.launch import ContainerLaunch
from flashfleet.planning import checks
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.resolve import SSH_PORT, StackPlan
from flashfleet.stack import capacity_block
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.spec import AwsSource, ExistingSource

_POD_KINDS = {"Deployment", "StatefulSet", "LeaderWorkerSet", "Job"}


def ttl_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def plan_addresses(b: StackPlan) -> tuple[list[str], list[str]]:
    """(SSH addresses, private addresses) as far as they are known offline."""
    ssh = [n.address or f"node-{n.index}" for n in b.nodes]
    private = [n.private_address or f"node-{n.index}" for n in b.nodes]
    return ssh, private


def source_summary(b: StackPlan) -> dict[str, Any]:
    src = b.spec.nodes.source
    if isinstance(src, ExistingSource):
        return {"kind": "existing", "hosts": [h.address for h in src.hosts]}
    assert isinstance(src, AwsSource)
    inst = b.instance
    return {
        "kind": "aws",
        "region": b.region,
        "instance_type": inst.name if inst else None,
        "arch": inst.arch if inst else None,
        "efa_network_cards": inst.efa_network_cards if inst else None,
        "host_memory_gib": inst.host_memory_gib if inst else None,
        "capacity": src.capacity.model_dump(by_alias=True),
        "placement_group": "cluster" if src.uses_placement_group else None,
        "network": src.network.model_dump(by_alias=True, mode="json"),
        "ingress": {
            "cidrs": [str(c) for c in src.allowed_cidrs],
            "ports": [SSH_PORT, b.serving_port],
            "within_group": "all traffic",
        },
        "public_ip": src.public_ip,
        "ami": src.ami or f"DLAMI via SSM ({src.dlami_os}, {inst.arch if inst else '?'})",
        "root_volume_gib": b.root_volume_gib,
        "imdsv2": "required",
        "ttl_guard": "the node shuts itself down (terminate on shutdown) at flashfleet:expires-at, "
        "or at launch + ttl when that tag was never readable",
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def capacity_summary(b: StackPlan) -> dict[str, Any] | None:
    """The reservation or block the nodes land in, and a bought block's window (None: on-demand)."""
    rid = capacity_block.reservation_id(b.spec)
    if rid is None:
        return None
    blk = capacity_block.block(b.spec)
    bought = blk.purchased if blk else None
    return {
        "kind": "block" if blk else "reservation",
        "reservation_id": rid,
        "needs_purchase": b.needs_capacity_purchase,
        "wait_for_start": bool(blk and blk.wait_for_start),
        "window": None
        if bought is None
        else {
            "availability_zone": bought.availability_zone,
            "instance_count": bought.instance_count,
            "start": _iso(bought.start),
            "end": _iso(bought.end),
            "nodes_until": _iso(capacity_block.usable_until(bought.end)),
            "upfront_price_usd": bought.upfront_price_usd,
        },
    }


def _pod_templates(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = obj["spec"]
    if obj["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [("leader", lwt["leaderTemplate"]["spec"]), ("worker", lwt["workerTemplate"]["spec"])]
    return [("pod", spec["template"]["spec"])]


def _container(c: dict[str, Any], pod: str, init: bool) -> dict[str, Any]:
    # Init containers run to completion first (weight downloads); sidecars are the processes that
    # others start after (restartPolicy Always); the rest start once those are up.
    stage = ("sidecar" if c.get("restartPolicy") == "Always" else "init") if init else "main"
    return {
        "pod": pod,
        "name": c["name"],
        "stage": stage,
        "image": c["image"],
        "command": list(c["command"]),
        "env": {e["name"]: e["value"] for e in c.get("env", []) if "value" in e},
        "env_from": sorted(e["name"] for e in c.get("env", []) if "valueFrom" in e),  # Secret, pod IP
        "resources": c.get("resources", {}),
    }


def kubernetes_workloads(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """Every object that runs pods, with its containers in start order."""
    out = []
    for obj in plan.objects:
        if obj["kind"] not in _POD_KINDS:
            continue
        containers = [
            _container(c, pod, init)
            for pod, spec in _pod_templates(obj)
            for init, group in ((True, spec.get("initContainers", [])), (False, spec["containers"]))
            for c in group
        ]
        name = obj["metadata"]["name"]
        out.append(
            {"kind": obj["kind"], "name": name, "serves": name in plan.workloads, "containers": containers}
        )
    return out


def kubernetes_summary(b: StackPlan, plan: KubernetesPlan) -> dict[str, Any]:
    src = b.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    return {
        "kind": "kubernetes",
        "context": src.context,  # None: the kubeconfig's current context
        "namespace": plan.namespace,
        "create_namespace": src.create_namespace,
        "node_pool": src.node_pools[b.spec.hardware].model_dump(
            by_alias=True, mode="json", exclude_none=True
        ),
        "model_cache": src.model_cache.model_dump(by_alias=True, mode="json"),
        "leader_worker_set": src.leader_worker_set,
        "service_type": src.service_type,
        "load_balancer_source_ranges": [str(c) for c in src.load_balancer_source_ranges],
        # The component makes the Secret from the flashfleet:hfToken secret, when the stack has one.
        "secret": plan.secret_name if b.has_hf_token else None,
        "objects": [f"{o['kind']}/{o['metadata']['name']}" for o in plan.objects],
        "workloads": kubernetes_workloads(plan),
    }


def _pod_process(launch: ContainerLaunch) -> dict[str, Any]:
    """A process as its container sees it on Kubernetes (no docker flags, no host paths)."""
    keys = ("name", "role", "node", "image", "argv", "env", "secret_env_names", "gpus", "port", "start_after")
    return launch.model_dump(mode="json", include=set(keys))


def _kubernetes_parts(b: StackPlan) -> dict[str, Any]:
    plan = checks.kubernetes_plan(b.stack, b.spec)
    src = b.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    endpoint = plan.endpoint
    if src.service_type == "LoadBalancer":
        endpoint = f"http://<load balancer of Service {plan.endpoint_service}>:{b.serving_port}/v1"
    mooncake = None
    if b.spec.mooncake is not None:
        mc = b.spec.mooncake
        cfg = k8s_mooncake.config(b.stack, plan.namespace, mc)
        mooncake = {
            "master_node": None,  # its own Deployment and Service
            "master_server_address": cfg["master_server_address"],
            "metadata_server": cfg["metadata_server"],
            "protocol": mc.protocol,
            "global_segment_gib": mc.global_segment_gib,
            "devices": list(mc.devices),
        }
    by_node: dict[int, list[dict[str, Any]]] = {n.index: [] for n in b.nodes}
    for launch in plan.launches:
        by_node[launch.node].append(_pod_process(launch))
    return {
        "recipe": plan.recipe,
        "source": kubernetes_summary(b, plan),
        "addresses": [None] * len(b.nodes),
        "processes": by_node,
        "mooncake": mooncake,
        "endpoint": endpoint,
    }


def _host_parts(b: StackPlan) -> dict[str, Any]:
    ssh, private = plan_addresses(b)
    launches = b.launches_by_node(private)
    return {
        "recipe": b.recipe_for(private),
        "source": source_summary(b),
        "addresses": ssh,
        "processes": {i: [la.model_dump(mode="json") for la in group] for i, group in launches.items()},
        "mooncake": b.mooncake.to_dict(private) if b.mooncake else None,
        "endpoint": f"http://{ssh[0]}:{b.serving_port}/v1",
    }


def plan_data(b: StackPlan) -> dict[str, Any]:
    kube = isinstance(b.spec.nodes.source, KubernetesSource)
    parts = _kubernetes_parts(b) if kube else _host_parts(b)
    recipe = parts["recipe"]
    cost = b.hourly_cost_usd
    return {
        "stack": b.stack,
        "description": b.spec.description,
        "hardware": b.spec.hardware,
        "strategy": b.spec.strategy,
        "topology": b.spec.topology,
        "badge": recipe.badge,
        "badge_source": recipe.badge_source,
        "model": recipe.model,
        "image": b.spec.image.model_dump(mode="json"),
        "ttl": b.spec.ttl if isinstance(b.spec.ttl, str) else ttl_text(b.spec.ttl.total_seconds()),
        "capacity": capacity_summary(b),
        "source": parts["source"],
        "nodes": [
            {
                "index": n.index,
                "name": n.name,
                "role": n.role,
                "address": parts["addresses"][n.index],
                "ssh_user": n.ssh_user,
                "instance_type": n.instance_type,
                "gpu_count": n.gpu_count,
                "host_memory_gb": n.host_memory_gb,
                "hicache_host_gb": n.hicache_host_gb,
                "mooncake_master": n.mooncake_master,
                "processes": parts["processes"][n.index],
            }
            for n in b.nodes
        ],
        "start_order": [f"{p.name}@node-{p.node}" for p in recipe.start_order()],
        "mooncake": parts["mooncake"],
        "endpoint": parts["endpoint"],
        "hourly_cost_usd": cost,
        "price_source": b.price_source,
        "critical_path": critical_path(b),
        "warnings": list(b.warnings),
        "notes": list(recipe.notes),
    }
