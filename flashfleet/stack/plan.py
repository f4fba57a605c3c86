"""The bring-up plan as data: what ``flashfleet plan`` prints (text or JSON), offline.

Addresses are not known before ``pulumi up`` on AWS, so AWS nodes appear as ``node-0``,
``node-1``...; existing hosts show their real addresses.
"""

from __future__ import annotations

from typing import Any

from flashfleet.stack.bringup import SSH_PORT, Bringup
from flashfleet.stack.spec import AwsSource, ExistingSource


def ttl_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def plan_addresses(b: Bringup) -> tuple[list[str], list[str]]:
    """(SSH addresses, private addresses) as far as they are known offline."""
    ssh = [n.address or f"node-{n.index}" for n in b.nodes]
    private = [n.private_address or f"node-{n.index}" for n in b.nodes]
    return ssh, private


def source_summary(b: Bringup) -> dict[str, Any]:
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
        "ttl_guard": "the node shuts itself down (terminate on shutdown) at flashfleet:expires-at",
    }


def plan_data(b: Bringup) -> dict[str, Any]:
    ssh, private = plan_addresses(b)
    launches = b.launches_by_node(private)
    recipe = b.recipe_for(private)
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
        "ttl": ttl_text(b.spec.ttl.total_seconds()),
        "source": source_summary(b),
        "nodes": [
            {
                "index": n.index,
                "name": n.name,
                "role": n.role,
                "address": ssh[n.index],
                "ssh_user": n.ssh_user,
                "instance_type": n.instance_type,
                "gpu_count": n.gpu_count,
                "host_memory_gb": n.host_memory_gb,
                "hicache_host_gb": n.hicache_host_gb,
                "mooncake_master": n.mooncake_master,
                "processes": [launch.to_dict() for launch in launches[n.index]],
            }
            for n in b.nodes
        ],
        "start_order": [f"{p.name}@node-{p.node}" for p in recipe.start_order()],
        "mooncake": b.mooncake.to_dict(private) if b.mooncake else None,
        "endpoint": f"http://{ssh[0]}:{b.serving_port}/v1",
        "hourly_cost_usd": cost,
        "warnings": list(b.warnings),
        "notes": list(recipe.notes),
    }
