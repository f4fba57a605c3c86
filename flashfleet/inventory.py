"""The Ansible inventory a stack produces: groups and one ``HostVars`` per host.

Pure (no pulumi): the Pulumi program calls it inside an ``apply`` once addresses exist, and the
tests and ``plan`` call it directly. Every fact a playbook needs is decided here, in Python, and
typed by ``flashfleet.bringup.host_vars.HostVars`` (docs/contracts.md lists them). Secrets are
never here: the HF token travels as a Pulumi secret output and reaches the runner as an
environment variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flashfleet.bringup.host_vars import HostVars, PdHeal, WeightsFanout
from flashfleet.catalog import DFLASH2_DRAFT, download_client, hardware_catalog, node_packages
from flashfleet.launch import ContainerLaunch
from flashfleet.planning import StackPlan
from flashfleet.planning.apt_packages import node_apt, role_locks
from flashfleet.planning.image_apt import image_apt_lock
from flashfleet.planning.packages import locked_for, pip_installs
from flashfleet.planning.pd_heal import pd_heal
from flashfleet.planning.weights_fanout import FANOUT_PORT, PEER_WAIT_S, fanout_seed
from flashfleet.recipes import Recipe
from flashfleet.stack.image_packages import image_packages, with_router
from flashfleet.stack.lock import LockedPackage
from flashfleet.stack.mooncake_endpoints import MooncakeEndpoints

HUGEPAGE_ENV = "MC_STORE_USE_HUGEPAGE"  # Mooncake's switch in a serving container's environment


PD_WORKERS = ("prefill", "decode")
# A checkpoint's weight files, as `hf download --exclude` takes them: what a node whose server
# loads from a peer replica leaves on the Hub (its index, config, tokenizer and code it downloads).
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")


def weights_client_facts(lock: LockedPackage | None = None) -> dict[str, Any]:
    """``flashfleet_weights_client``: the catalog's download client, as the host is told it, with
    the stack's lock of it."""
    client = download_client()
    return {
        "hub_version": client.hub_version,
        "revision": client.revision,
        "max_workers": client.max_workers,
        "lock": lock,
    }


def weights_fanout(plan: StackPlan, index: int, private_addresses: Sequence[str]) -> WeightsFanout | None:
    """Node `index`'s part in fetching the weights once per stack, or None: it asks the Hub on
    its own (flashfleet.planning.weights_fanout)."""
    seed, node = fanout_seed(plan), plan.nodes[index]
    if seed is None or not node.gpu_node:
        return None
    common = {"seed": seed.name, "seed_address": private_addresses[seed.index], "port": FANOUT_PORT,
              "wait_s": PEER_WAIT_S}  # fmt: skip
    if node.index == seed.index:
        return WeightsFanout(
            role="seed", peers=[n.name for n in plan.gpu_nodes if n.index != seed.index], **common
        )
    return WeightsFanout(role="peer", **common)


def host_vars(
    plan: StackPlan,
    index: int,
    ssh_address: str,
    private_addresses: Sequence[str],
    host_keys: Sequence[str] | None = None,
    *,
    recipe: Recipe,
    node_launches: Sequence[ContainerLaunch],
) -> dict[str, Any]:
    """One node's variables; ``recipe`` is the stack's, rendered with ``private_addresses``."""
    spec, node = plan.spec, plan.nodes[index]
    keys = list(host_keys if host_keys is not None else node.host_keys)
    hw = hardware_catalog()[spec.hardware]
    gpus = node.gpu_node  # a router's own host: no GPU checks, driver, toolkit or weights
    dflash2 = recipe.options.speculative == "dflash2"
    launches = [launch.model_dump(mode="json") for launch in node_launches]
    # A PD worker answers /v1/models but not a client's chat (decode waits for its prefill's KV):
    # clients, and verify, reach prefill and decode only through a router.
    api = [launch["port"] for launch in launches if launch["serves_api"] and launch["role"] not in PD_WORKERS]
    installs = pip_installs(spec)
    held = with_router(
        image_packages(spec.image.version, hw, spec.image.packages), spec.router_program == "smg"
    )
    apt_wants = node_apt(spec, plan.site_args, plan.router_arch)
    layout = None
    if spec.mooncake is not None:
        # Hugepages only when the serving containers are told to use them.
        hugepages = any(HUGEPAGE_ENV in launch["env"] for launch in launches)
        [wheel] = [i for i in installs.values() if i.installer == "mooncake"]
        layout = {
            **MooncakeEndpoints.of(spec.mooncake, private_addresses).model_dump(),
            "hugepages_gib": spec.mooncake.global_segment_gib if hugepages else 0,
            "wheel": f"{wheel.name}{wheel.specifier}",
            "lock": locked_for(installs, plan.lock, "mooncake").get(wheel.name),
        }
    heal = pd_heal(recipe, node_launches)
    hvars = HostVars.model_validate(
        dict(
            ansible_host=ssh_address,
            ansible_user=node.ssh_user,
            flashfleet_stack=plan.stack,
            flashfleet_hardware=spec.hardware,
            flashfleet_vendor=hw.vendor,
            flashfleet_arch=hw.arch,
            flashfleet_gpu_node=gpus,
            flashfleet_gpu_count=node.gpu_count if gpus else 0,
            flashfleet_gpu_model=hw.gpu_model if gpus else "",
            flashfleet_host_memory_gb=node.host_memory_gb,
            flashfleet_hicache_host_gb=node.hicache_host_gb,
            flashfleet_node_index=index,
            flashfleet_model=recipe.model,
            flashfleet_draft_model=DFLASH2_DRAFT if gpus and dflash2 else None,
            flashfleet_image=spec.image.base_ref(hw),
            flashfleet_image_derived=(
                {
                    "ref": spec.image.derived_ref(hw),
                    "release": spec.image.version,
                    "pins": held.role_pins(),
                    "video": held.video is None,
                    "refused_transformers": list(held.refused_transformers),
                    "packages": locked_for(installs, plan.lock, "sglang_image"),
                    "apt": image_apt_lock(spec, hw, plan.site_args, plan.lock),
                }
                if spec.image.derived
                else None
            ),
            flashfleet_driver=hw.driver if gpus else None,
            # one NVLink domain a stack: IMEX on each GPU node lists every GPU node, as its peers
            # reach it (the private network, never the SSH address)
            flashfleet_imex_nodes=[private_addresses[n.index] for n in plan.gpu_nodes]
            if gpus and hw.driver is not None and hw.driver.imex
            else [],
            flashfleet_node_packages=node_packages().versions(),
            # what the lock holds of each role's repository directories, whatever this node runs
            flashfleet_apt_lock=role_locks(apt_wants, plan.lock.apt) if plan.lock is not None else None,
            flashfleet_model_cache_dir=spec.model_cache_dir,
            flashfleet_mooncake=spec.mooncake is not None,
            flashfleet_processes=launches,
            flashfleet_reasoning=recipe.options.reasoning_parser == "on",
            flashfleet_tool_calls=recipe.options.tool_call_parser == "on",
            flashfleet_hicache_storage=recipe.options.hicache == "l1l2l3",
            flashfleet_api_port=api[-1] if api else None,
            flashfleet_api_key_required=any(launch["api_key_file"] for launch in launches),
            flashfleet_mooncake_layout=layout,
            # Without a teardown section the caches are kept.
            flashfleet_keep_caches=spec.keeps_caches,
            # Pinned by every run (bringup.playbook_run): AWS nodes' keys as their consoles
            # showed them, existing hosts' as the stack lists them.
            flashfleet_host_keys=keys or None,
            flashfleet_weights_prestaged=spec.weights.prestaged,
            flashfleet_weights_volume=gpus and plan.weights_snapshot is not None,
            flashfleet_weights_exclude=list(WEIGHT_FILES) if any(p["load_from"] for p in launches) else [],
            flashfleet_weights_client=weights_client_facts(
                locked_for(installs, plan.lock, "model_weights").get("huggingface_hub")
            ),
            # what this node downloads, of what the lock pins
            flashfleet_weights_lock=(
                {r: e for r, e in plan.lock.weights.items() if gpus and r in recipe.repositories}
                if plan.lock is not None
                else None
            ),
            flashfleet_weights_fanout=weights_fanout(plan, index, private_addresses),
            flashfleet_pd_heal=PdHeal(**heal) if heal is not None else None,
        )
    )
    return hvars.inventory_vars()


def build_inventory(
    plan: StackPlan,
    ssh_addresses: Sequence[str],
    private_addresses: Sequence[str],
    host_keys: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The inventory as ansible-runner takes it (``inventory=<dict>``).

    ``host_keys``: each node's SSH host keys read from the node itself (AWS consoles), in node
    order; None takes the stack's own (existing hosts' ``hostKeys``)."""
    if not len(ssh_addresses) == len(private_addresses) == len(plan.nodes):
        raise ValueError(
            f"{len(plan.nodes)} nodes but {len(ssh_addresses)} SSH and "
            f"{len(private_addresses)} private addresses"
        )
    hw = hardware_catalog()[plan.spec.hardware]
    if host_keys is not None and len(host_keys) != len(plan.nodes):
        raise ValueError(f"{len(plan.nodes)} nodes but host keys for {len(host_keys)}")
    # rendered once for all nodes: every node's launches come from the same recipe
    recipe = plan.recipe_for(private_addresses)
    launches = plan.node_launches(recipe)
    hosts = {
        node.name: host_vars(
            plan,
            node.index,
            ssh_addresses[node.index],
            private_addresses,
            None if host_keys is None else host_keys[node.index],
            recipe=recipe,
            node_launches=launches[node.index],
        )
        for node in plan.nodes
    }
    members: dict[str, dict[str, Any]] = {name: {} for name in hosts}
    # the GPU plays (drivers, IMEX's node list) target the vendor and hardware groups: a router's
    # own host is in neither
    gpu_nodes: dict[str, dict[str, Any]] = {n.name: {} for n in plan.nodes if n.gpu_node}
    children: dict[str, Any] = {
        "flashfleet": {"hosts": dict(members)},
        f"vendor_{hw.vendor}": {"hosts": dict(gpu_nodes)},
        f"hw_{hw.id}": {"hosts": dict(gpu_nodes)},
    }
    masters: dict[str, dict[str, Any]] = {n.name: {} for n in plan.nodes if n.mooncake_master}
    if masters:
        children["mooncake_master"] = {"hosts": masters}
    children.update(instance_groups(plan, launches))
    return {"all": {"hosts": hosts, "children": children}}


def instance_groups(plan: StackPlan, launches: dict[int, list[ContainerLaunch]]) -> dict[str, Any]:
    """A cluster's groups: `instance_<name>` per instance (its nodes), and `serve_batch`, the nodes
    serve.yml updates at a time. Replicas: the first instance's nodes, one instance after another,
    so the router keeps the others serving. PD: every prefill and decode node in one batch, because
    the group is cut as a whole (sglang_serve's cut.yml): a new prefill must never hand its KV to an
    old decode, nor an old prefill to a new one."""
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for node in plan.nodes:
        for launch in launches[node.index]:
            if launch.instance and launch.role != "router":
                groups.setdefault(f"instance_{launch.instance.replace('-', '_')}", {})[node.name] = {}
    if len(groups) < 2:
        return {}
    pd: dict[str, dict[str, Any]] = (
        {name: {} for hosts in groups.values() for name in hosts} if plan.spec.topology == "pd" else {}
    )
    first = pd or next(iter(groups.values()))
    return {
        **{name: {"hosts": hosts} for name, hosts in groups.items()},
        "serve_batch": {"hosts": dict(first)},
    }
