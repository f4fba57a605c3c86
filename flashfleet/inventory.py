"""The Ansible inventory a stack produces: groups and ``flashfleet_*`` host facts.

Pure (no pulumi): the Pulumi program calls it inside an ``apply`` once addresses exist, and the
tests and ``plan`` call it directly. The variables are the ones docs/contracts.md lists, plus
``flashfleet_mooncake_layout`` on L3 stacks (master address, metadata URL, protocol, segment),
which the Mooncake role needs and the contract does not list yet. Secrets are never here: the
HF token travels as a Pulumi secret output and reaches the runner as an environment variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flashfleet.catalog import DFLASH2_DRAFT, hardware_catalog
from flashfleet.planning import StackPlan

GPU_MODEL = {"gb300": "GB300", "h200": "H200", "mi355x": "MI355X"}


def host_vars(
    plan: StackPlan, index: int, ssh_address: str, private_addresses: Sequence[str]
) -> dict[str, Any]:
    spec, node = plan.spec, plan.nodes[index]
    hw = hardware_catalog()[spec.hardware]
    recipe = plan.recipe_for(private_addresses)
    launches = plan.launches_by_node(private_addresses)[index]
    hvars: dict[str, Any] = {
        "ansible_host": ssh_address,
        "ansible_user": node.ssh_user,
        "flashfleet_stack": plan.stack,
        "flashfleet_hardware": spec.hardware,
        "flashfleet_vendor": hw.vendor,
        "flashfleet_arch": hw.arch,
        "flashfleet_gpu_count": node.gpu_count,
        "flashfleet_gpu_model": GPU_MODEL.get(spec.hardware, spec.hardware.upper()),
        "flashfleet_host_memory_gb": node.host_memory_gb,
        "flashfleet_hicache_host_gb": node.hicache_host_gb,
        "flashfleet_node_index": index,
        "flashfleet_model": recipe.model,
        "flashfleet_draft_model": DFLASH2_DRAFT if recipe.options.speculative == "dflash2" else None,
        "flashfleet_image": spec.image.base_ref(hw),
        "flashfleet_model_cache_dir": spec.model_cache_dir,
        "flashfleet_mooncake": plan.mooncake is not None,
        "flashfleet_processes": [launch.to_dict() for launch in launches],
    }
    if plan.mooncake is not None:
        hvars["flashfleet_mooncake_layout"] = plan.mooncake.to_dict(private_addresses)
    if node.host_keys:
        hvars["flashfleet_host_keys"] = list(node.host_keys)
    if spec.teardown is not None:
        # Only a stack with a teardown section says; without it teardown.yml keeps the caches.
        hvars["flashfleet_keep_caches"] = spec.teardown.keep_caches
    return hvars


def build_inventory(
    plan: StackPlan, ssh_addresses: Sequence[str], private_addresses: Sequence[str]
) -> dict[str, Any]:
    """The inventory as ansible-runner takes it (``inventory=<dict>``)."""
    if not len(ssh_addresses) == len(private_addresses) == len(plan.nodes):
        raise ValueError(
            f"{len(plan.nodes)} nodes but {len(ssh_addresses)} SSH and "
            f"{len(private_addresses)} private addresses"
        )
    hw = hardware_catalog()[plan.spec.hardware]
    hosts = {
        node.name: host_vars(plan, node.index, ssh_addresses[node.index], private_addresses)
        for node in plan.nodes
    }
    members: dict[str, dict[str, Any]] = {name: {} for name in hosts}
    children: dict[str, Any] = {
        "flashfleet": {"hosts": dict(members)},
        f"vendor_{hw.vendor}": {"hosts": dict(members)},
        f"hw_{hw.id}": {"hosts": dict(members)},
    }
    masters: dict[str, dict[str, Any]] = {n.name: {} for n in plan.nodes if n.mooncake_master}
    if masters:
        children["mooncake_master"] = {"hosts": masters}
    return {"all": {"hosts": hosts, "children": children}}
