"""The bring-up plan as data (``PlanView``): what ``flashfleet plan`` prints (text or JSON), offline.

Addresses are not known before ``pulumi up`` on AWS, so AWS nodes appear as ``node-0``,
``node-1``...; existing hosts show their real addresses. A Kubernetes stack has no hosts: its
plan lists the objects and, per workload, each container's image and command.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flashfleet.catalog import download_client, hardware_catalog, image_apt
from flashfleet.catalog.multimodal_packages import image_packages_catalog
from flashfleet.k8s import KubernetesPlan
from flashfleet.k8s import mooncake as k8s_mooncake
from flashfleet.launch import ContainerLaunch
from flashfleet.planning.apt_packages import locked_wants, node_apt, where
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.image_apt import image_apt_lock
from flashfleet.planning.packages import pip_installs
from flashfleet.planning.plan_model import (
    AwsSourceView,
    CapacityView,
    CapacityWindow,
    ClusterView,
    ExistingSourceView,
    Ingress,
    InstanceView,
    KubernetesMooncake,
    KubernetesSourceView,
    LockedPart,
    LockView,
    MeasuredStartup,
    NodeView,
    PlanView,
    PodProcess,
    RouterNodeView,
    RouterProgramView,
    RouterSettingView,
    RouterView,
    SourceView,
    Workload,
    WorkloadContainer,
)
from flashfleet.planning.resolve import SSH_PORT, StackPlan
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.planning.update_outage import update_view
from flashfleet.recipes import Recipe
from flashfleet.recipes.cluster import ROUTERS
from flashfleet.recipes.layouts import api_base
from flashfleet.recipes.router_settings import router_settings
from flashfleet.stack import capacity_block
from flashfleet.stack.image_packages import image_packages, with_router
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.lock import lock_file_name
from flashfleet.stack.mooncake_endpoints import MooncakeEndpoints
from flashfleet.stack.spec import AwsSource, ExistingSource, StackSpec

_POD_KINDS = {"Deployment", "StatefulSet", "LeaderWorkerSet", "Job"}


def ttl_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def plan_addresses(plan: StackPlan) -> tuple[list[str], list[str]]:
    """(SSH addresses, private addresses) as far as they are known offline."""
    ssh = [n.address or f"node-{n.index}" for n in plan.nodes]
    private = [n.private_address or f"node-{n.index}" for n in plan.nodes]
    return ssh, private


def source_summary(plan: StackPlan) -> AwsSourceView | ExistingSourceView:
    src = plan.spec.nodes.source
    if isinstance(src, ExistingSource):
        return ExistingSourceView(hosts=[h.address for h in src.hosts])
    assert isinstance(src, AwsSource)
    inst = plan.instance
    return AwsSourceView(
        region=plan.region,
        instance_type=inst.name if inst else None,
        arch=inst.arch if inst else None,
        efa_network_cards=inst.efa_network_cards if inst else None,
        host_memory_gib=inst.host_memory_gib if inst else None,
        capacity=src.capacity.model_dump(by_alias=True),
        placement_group="cluster" if src.uses_placement_group else None,
        network=src.network.model_dump(by_alias=True, mode="json"),
        ingress=Ingress(
            cidrs=[str(c) for c in src.allowed_cidrs],
            ports=[SSH_PORT, plan.serving_port],
            within_group="all traffic",
        ),
        public_ip=src.public_ip,
        ami=src.ami or f"DLAMI via SSM ({src.dlami_os}, {inst.arch if inst else '?'})",
        root_volume_gib=plan.root_volume_gib,
        imdsv2="required",
        ttl_guard="the node shuts itself down (terminate on shutdown) at flashfleet:expires-at, "
        "or at launch + ttl when that tag was never readable",
        gpu_nodes=len(plan.gpu_nodes),
        router_node=_router_node(plan, src.dlami_os),
    )


def _router_node(plan: StackPlan, os_name: str) -> RouterNodeView | None:
    r = plan.router_instance
    if r is None or plan.router_root_volume_gib is None:
        return None
    return RouterNodeView(
        node=plan.endpoint_node,
        instance_type=r.name,
        arch=r.arch,
        ami=f"Canonical Ubuntu via SSM ({os_name}, {r.arch})",
        root_volume_gib=plan.router_root_volume_gib,
        price_usd_per_hour=r.price_usd_per_hour,
        price_source=r.price_source,
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def capacity_summary(plan: StackPlan) -> CapacityView | None:
    """The reservation or block the nodes land in, and a bought block's window (None: on-demand)."""
    rid = capacity_block.reservation_id(plan.spec)
    if rid is None:
        return None
    blk = capacity_block.block(plan.spec)
    bought = blk.purchased if blk else None
    return CapacityView(
        kind="block" if blk else "reservation",
        reservation_id=rid,
        needs_purchase=plan.needs_capacity_purchase,
        wait_for_start=bool(blk and blk.wait_for_start),
        window=None
        if bought is None
        else CapacityWindow(
            availability_zone=bought.availability_zone,
            instance_count=bought.instance_count,
            start=_iso(bought.start),
            end=_iso(bought.end),
            nodes_until=_iso(capacity_block.usable_until(bought.end)),
            upfront_price_usd=bought.upfront_price_usd,
        ),
    )


def _pod_templates(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = obj["spec"]
    if obj["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [("leader", lwt["leaderTemplate"]["spec"]), ("worker", lwt["workerTemplate"]["spec"])]
    return [("pod", spec["template"]["spec"])]


def _container(c: dict[str, Any], pod: str, init: bool) -> WorkloadContainer:
    # Init containers run to completion first (weight downloads); sidecars are the processes that
    # others start after (restartPolicy Always); the rest start once those are up.
    stage = ("sidecar" if c.get("restartPolicy") == "Always" else "init") if init else "main"
    return WorkloadContainer(
        pod=pod,
        name=c["name"],
        stage=stage,
        image=c["image"],
        command=list(c["command"]),
        env={e["name"]: e["value"] for e in c.get("env", []) if "value" in e},
        env_from=sorted(e["name"] for e in c.get("env", []) if "valueFrom" in e),  # Secret, pod IP
        resources=c.get("resources", {}),
    )


def kubernetes_workloads(plan: KubernetesPlan) -> list[Workload]:
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
            Workload(
                kind=obj["kind"],
                name=name,
                serves=name in plan.workloads and name != plan.router,
                routes=name == plan.router,
                containers=containers,
            )
        )
    return out


def kubernetes_summary(stack_plan: StackPlan, plan: KubernetesPlan) -> KubernetesSourceView:
    src = stack_plan.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    return KubernetesSourceView(
        context=src.context,
        namespace=plan.namespace,
        create_namespace=src.create_namespace,
        node_pool=src.node_pools[stack_plan.spec.hardware].model_dump(
            by_alias=True, mode="json", exclude_none=True
        ),
        model_cache=src.model_cache.model_dump(by_alias=True, mode="json"),
        leader_worker_set=src.leader_worker_set,
        service_type=src.service_type,
        load_balancer_source_ranges=[str(c) for c in src.load_balancer_source_ranges],
        # The component makes the Secret from the flashfleet:hfToken secret, when the stack has one.
        secret=plan.secret_name if stack_plan.has_hf_token else None,
        objects=[f"{o['kind']}/{o['metadata']['name']}" for o in plan.objects],
        workloads=kubernetes_workloads(plan),
    )


def _pod_process(launch: ContainerLaunch) -> PodProcess:
    """A process as its container sees it on Kubernetes (no docker flags, no host paths)."""
    return PodProcess.model_validate(launch.model_dump(mode="json", include=set(PodProcess.model_fields)))


@dataclass(frozen=True)
class _Parts:
    """What differs between a Kubernetes stack's plan and a hosts' one."""

    recipe: Recipe
    source: SourceView
    addresses: list[str | None]
    processes: dict[int, list[ContainerLaunch | PodProcess]]
    mooncake: MooncakeEndpoints | KubernetesMooncake | None
    endpoint: str


def _kubernetes_parts(stack_plan: StackPlan) -> _Parts:
    plan = kubernetes_plan(stack_plan.stack, stack_plan.spec, stack_plan.lock)
    src = stack_plan.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    endpoint = plan.endpoint
    if src.service_type == "LoadBalancer":
        endpoint = api_base(f"<load balancer of Service {plan.endpoint_service}>", stack_plan.serving_port)
    mooncake = None
    if stack_plan.spec.mooncake is not None:
        mc = stack_plan.spec.mooncake
        cfg = k8s_mooncake.config(stack_plan.stack, plan.namespace, mc)
        mooncake = KubernetesMooncake(
            master_server_address=cfg["master_server_address"],
            metadata_server=cfg["metadata_server"],
            protocol=mc.protocol,
            global_segment_gib=mc.global_segment_gib,
            devices=list(mc.devices),
        )
    by_node: dict[int, list[ContainerLaunch | PodProcess]] = {n.index: [] for n in stack_plan.nodes}
    for launch in plan.launches:
        by_node[launch.node].append(_pod_process(launch))
    return _Parts(
        recipe=plan.recipe,
        source=kubernetes_summary(stack_plan, plan),
        addresses=[None] * len(stack_plan.nodes),
        processes=by_node,
        mooncake=mooncake,
        endpoint=endpoint,
    )


def _host_parts(plan: StackPlan) -> _Parts:
    ssh, private = plan_addresses(plan)
    # Before `pulumi up` the addresses are the symbolic ones the stack's recipe already has.
    known = any(n.private_address for n in plan.nodes)
    recipe = plan.recipe_for(private if known else None)
    launches = plan.node_launches(recipe)
    return _Parts(
        recipe=recipe,
        source=source_summary(plan),
        addresses=list(ssh),
        processes={i: list(group) for i, group in launches.items()},
        mooncake=MooncakeEndpoints.of(plan.spec.mooncake, private) if plan.spec.mooncake else None,
        endpoint=api_base(ssh[plan.endpoint_node], plan.serving_port),
    )


def cluster_summary(plan: StackPlan, recipe: Recipe, addresses: list[str | None]) -> ClusterView | None:
    """A cluster's instances (which node runs what), its router and the path a request takes."""
    cluster = plan.spec.cluster
    if cluster is None:
        return None
    router = next(p for p in recipe.processes if p.role == "router")
    nodes: dict[str, list[int]] = {}  # per instance, in start order
    roles: dict[str, str] = {}
    urls: dict[str, str] = {}
    for proc in recipe.start_order():
        if proc.role == "router":
            continue
        on = nodes.setdefault(proc.instance, [])
        roles.setdefault(proc.instance, proc.role)
        if proc.node not in on:
            on.append(proc.node)
        if proc.url:
            urls[proc.instance] = proc.url
    instances = [
        InstanceView(
            name=name, role=roles[name], nodes=on, addresses=[addresses[i] for i in on], url=urls.get(name)
        )
        for name, on in nodes.items()
    ]
    names = list(nodes)
    if plan.spec.topology == "pd":
        prefill = [n for n in names if n.startswith("prefill")]
        decode = [n for n in names if n.startswith("decode")]
        hops = [" | ".join(prefill) + f" (prefill; KV over {recipe.options.kv_transfer})", " | ".join(decode)]
    else:
        hops = [" | ".join(names)]
    where = addresses[router.node] or f"node-{router.node}"
    return ClusterView(
        shape=cluster.shape_text(),
        policy=cluster.router.policy,
        router=RouterView(node=router.node, address=where, port=router.port),
        instances=instances,
        request_path=" -> ".join(
            [f"client -> router {where}:{router.port} ({cluster.router.policy})", *hops]
        ),
    )


def router_program(spec: StackSpec, recipe: Recipe) -> RouterProgramView | None:
    """The router's program and its settings, each with SMG's default, why and the source."""
    router = next((p for p in recipe.processes if p.role == "router"), None)
    if router is None or spec.router_program is None:
        return None
    command = " ".join(ROUTERS[spec.router_program])
    if spec.router_program == "sglang_router":
        why = (
            "the release image's own router (image.derived false: SMG is not in the release image); "
            "its own defaults hold (a request is held up to 1800 s)"
        )
        return RouterProgramView(program="sglang_router", command=command, why=why, settings=[])
    pin = image_packages_catalog().router
    settings = [
        RouterSettingView(flag=s.shown(), smg_default=s.smg_default, why=s.why, source=s.source)
        for s in router_settings("pd" if spec.topology == "pd" else "replicas")
        if " ".join(s.words()) in " ".join(router.argv)
    ]
    why = f"SMG, smg=={pin.smg} installed by the derived image ({pin.source})"
    return RouterProgramView(program="smg", command=command, why=why, settings=settings)


def _floating(kind: str, name: str, detail: str) -> LockedPart:
    return LockedPart.model_validate(
        {"kind": kind, "name": name, "state": "floating", "pinned": None, "detail": detail}
    )


def _locked(kind: str, name: str, pinned: str, detail: str) -> LockedPart:
    return LockedPart(kind=kind, name=name, state="locked", pinned=pinned, detail=detail)


_INSTALLED_BY = {
    "sglang_image": "in the derived image",
    "model_weights": "the weights download client",
    "mooncake": "the Mooncake wheel",
}


def _apt_parts(plan: StackPlan) -> list[LockedPart]:
    """What the roles apt-install from vendors' repositories, a part per label (the NVIDIA driver,
    Docker Engine, ...): locked for the distributions the lock holds it for, with every package its
    pins name at a version they allow."""
    wants = node_apt(plan.spec, plan.site_args, plan.router_arch)
    locked = locked_wants(wants, plan.lock)
    parts = []
    for label in dict.fromkeys(w.label for w in wants):
        mine = [w for w in wants if w.label == label]
        name = f"{label} (apt): " + ", ".join(mine[0].install)
        held = {w: dirs for w, dirs in locked.items() if w.label == label}
        if plan.lock is None or not held:
            why = "by version (the catalog's); apt checks them against the signed index, not against a lock"
            parts.append(_floating("packages", name, why))
            continue
        dirs = list(dict.fromkeys(d for ds in held.values() for d in ds))
        count = sum(len(plan.lock.apt[d]) for d in dirs)
        detail = (
            f"{count} packages as of {plan.lock.locked_on} for {', '.join(where(d) for d in dirs)} (a node "
            "elsewhere stops); each SHA256 checked in the node's index, and what apt would install, "
            "before installing"
        )
        first = mine[0].install[0]
        version = next(plan.lock.apt[d][first].version for d in dirs if first in plan.lock.apt[d])
        parts.append(_locked("packages", name, version, detail))
    return parts


def _image_apt_part(plan: StackPlan) -> list[LockedPart]:
    """What the derived image apt-installs from its base's distribution archive: locked to a
    snapshot of that archive, or by name from the archive as it is on the day of the build."""
    if not plan.spec.image.derived:
        return []
    names = image_apt().packages
    name = f"{', '.join(names)} in the derived image (apt)"
    held = image_apt_lock(plan.spec, hardware_catalog()[plan.spec.hardware], plan.site_args, plan.lock)
    if held is None:
        why = "by name, from the base image's distribution archive as it is on the day of the build"
        return [_floating("packages", name, why)]
    detail = (
        f"{held.distribution} {held.arch}, from the archive's snapshot {held.snapshot} with the "
        "dependencies it holds; each suite's signed index hash and each package's SHA256 checked in the build"
    )
    return [_locked("packages", name, held.packages[names[0]].version, detail)]


def lock_summary(plan: StackPlan) -> LockView:
    """Each moving part of the stack as locked (to what) or floating (and why)."""
    lock, spec = plan.lock, plan.spec
    client = download_client()
    parts = []
    for repo in plan.recipe.repositories:
        entry = lock.weights.get(repo) if lock is not None else None
        if lock is None or entry is None:
            parts.append(_floating("weights", repo, f"revision {client.revision}, whatever it is on the day"))
            continue
        detail = (
            f"{entry.revision} as of {lock.locked_on}; {len(entry.files)} files, each one's size and hash"
        )
        detail += " checked on the node"
        parts.append(_locked("weights", repo, entry.commit, detail))
    tagged = spec.image.tagged_ref(hardware_catalog()[spec.hardware])
    if lock is not None and tagged in lock.images:
        image = lock.images[tagged]
        detail = (
            f"the tag's digest as of {lock.locked_on}, pulled and run by it "
            f"({', '.join(sorted(image.platforms))})"
        )
        parts.append(_locked("image", tagged, image.digest, detail))
    elif spec.image.digest:
        parts.append(
            _locked("image", tagged, spec.image.digest, "pulled and run by the stack's image.digest")
        )
    else:
        parts.append(_floating("image", tagged, "a tag, whatever it names on the day"))
    installs = pip_installs(spec, plan.site_args)
    for name, want in installs.items():
        where = _INSTALLED_BY[want.installer]
        locked = lock.packages.get(name) if lock is not None else None
        if lock is None or locked is None or not want.allows(locked):
            parts.append(_floating("packages", f"{name}{want.specifier}", f"{where}: whatever the index has"))
            continue
        detail = f"{where}: {locked.version} as of {lock.locked_on}; {len(locked.files)} files, the node"
        detail += " installs only one of those bytes"
        parts.append(_locked("packages", name, locked.version, detail))
    parts.extend(_apt_parts(plan))
    parts.extend(_image_apt_part(plan))
    if spec.nodes.source.kind != "kubernetes":
        apt = "by name, from the distribution's archive; apt checks each against its signed index, not a lock"
        parts.append(_floating("packages", "system libraries the vendors' packages depend on (apt)", apt))
    for node_image in plan.node_images:
        name = node_image.label
        if node_image.stack_ami is not None:
            parts.append(_locked("node-image", name, node_image.stack_ami, "the stack's nodes.source.ami"))
        elif node_image.locked is not None and lock is not None:
            detail = f"what {node_image.parameter} named in {node_image.locked.region} as of {lock.locked_on}"
            parts.append(_locked("node-image", name, node_image.locked.ami, detail))
        else:
            why = f"{node_image.parameter}: whatever release it names at bring-up"
            parts.append(_floating("node-image", name, why))
    return LockView(
        file=lock_file_name(plan.stack),
        present=lock is not None,
        required=spec.lock == "required",
        digest=lock.digest if lock is not None else None,
        locked_on=lock.locked_on if lock is not None else None,
        parts=parts,
    )


def cookbook_badge(hardware: str, strategy: str, topology: str) -> str | None:
    """The cookbook's badge for the cell, as its catalog records it; None where it records none."""
    from flashfleet.catalog import badge_catalog

    cells, _ = badge_catalog()
    key = (hardware, strategy, topology)
    return next((e.badge for e in cells if (e.hardware, e.strategy, e.topology) == key), None)


def badge_origin(badge: str, source: str, cell_badge: str | None) -> str:
    """Whose the badge is: the cookbook's own (its cell's, or a variant it measured), or lowered
    by flashfleet from the cookbook's, and why."""
    from flashfleet.catalog import badge_catalog

    cells, measured = badge_catalog()
    if any(e.badge == badge and e.source == source for e in cells + measured):
        return "the cookbook's badge"
    if cell_badge is not None and cell_badge != badge:
        return f"lowered by flashfleet from the cookbook's {cell_badge}: {source}"
    return source


def plan_data(plan: StackPlan, measured: MeasuredStartup | None = None) -> PlanView:
    """The plan; ``measured``: a recorded bring-up's own startup figures (time_to_first_token)."""
    kube = isinstance(plan.spec.nodes.source, KubernetesSource)
    parts = _kubernetes_parts(plan) if kube else _host_parts(plan)
    recipe = parts.recipe
    path = critical_path(plan)
    cell_badge = cookbook_badge(plan.spec.hardware, plan.spec.strategy, plan.spec.topology)
    ttft = time_to_first_token(plan, path, measured)
    return PlanView(
        stack=plan.stack,
        description=plan.spec.description,
        hardware=plan.spec.hardware,
        strategy=plan.spec.strategy,
        topology=plan.spec.topology,
        badge=recipe.badge,
        badge_source=recipe.badge_source,
        cookbook_badge=cell_badge,
        badge_origin=badge_origin(recipe.badge, recipe.badge_source, cell_badge),
        model=recipe.model,
        image=plan.spec.image,
        image_packages=with_router(
            image_packages(
                plan.spec.image.version, hardware_catalog()[plan.spec.hardware], plan.spec.image.packages
            ),
            plan.spec.router_program == "smg",
        ),
        ttl=plan.spec.ttl if isinstance(plan.spec.ttl, str) else ttl_text(plan.spec.ttl.total_seconds()),
        capacity=capacity_summary(plan),
        source=parts.source,
        nodes=[
            NodeView(
                index=n.index,
                name=n.name,
                role=n.role,
                address=parts.addresses[n.index],
                ssh_user=n.ssh_user,
                instance_type=n.instance_type,
                gpu_count=n.gpu_count,
                host_memory_gb=n.host_memory_gb,
                host_memory_gib=n.host_memory_gib,
                hicache_host_gb=n.hicache_host_gb,
                mooncake_master=n.mooncake_master,
                processes=parts.processes[n.index],
            )
            for n in plan.nodes
        ],
        cluster=None if kube else cluster_summary(plan, recipe, parts.addresses),
        router=router_program(plan.spec, recipe),
        start_order=[f"{p.name}@node-{p.node}" for p in recipe.start_order()],
        mooncake=parts.mooncake,
        endpoint=parts.endpoint,
        hourly_cost_usd=plan.hourly_cost_usd,
        price_source=plan.price_source,
        priced_part_usd=plan.cost_parts[0] if plan.hourly_cost_usd is None else None,
        unpriced=plan.cost_parts[1],
        critical_path=path,
        time_to_first_token=ttft,
        update=update_view(plan, ttft),
        lock=lock_summary(plan),
        warnings=list(plan.warnings),
        notes=list(recipe.notes),
    )
