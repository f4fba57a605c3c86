"""Cross-field checks of a structurally valid stack: the recipe engine's rules, the image's build
requirements, instance and host facts, the HiCache host tier, the Mooncake layout and, on the
Kubernetes source, the manifests themselves.

Each check returns problems (path + reason) instead of raising, so one run reports them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from flashfleet.catalog import hardware_catalog
from flashfleet.catalog.instances import InstanceType, gib_to_gb, instance_catalog
from flashfleet.k8s import KubernetesRenderError
from flashfleet.launch import check_build_requirements
from flashfleet.planning import apt_packages, image_apt, node_images, packages
from flashfleet.planning.stack_recipe import kubernetes_plan, recipe_path, recipe_problem, router_node
from flashfleet.recipes import Recipe, RecipeError
from flashfleet.recipes.render import name_errors
from flashfleet.sizing import SizingError, check_host_tier_fits, host_tier_need_gb
from flashfleet.stack.errors import Problem
from flashfleet.stack.image_packages import ImagePinError, image_packages
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.lock import StackLock, lock_file_name
from flashfleet.stack.spec import (
    BLOCK_TTL,
    AwsSource,
    CapacityBlock,
    ExistingSource,
    Mooncake,
    NewNetwork,
    StackSpec,
)

HICACHE_FLAG = "--enable-hierarchical-cache"


@dataclass(frozen=True)
class NodeFacts:
    """What the stack says (or the catalog knows) about one node's machine."""

    gpu_model: str | None  # None: a router's own host that lists no GPUs
    gpu_count: int
    host_memory_gib: int | None  # as stack files and instance sheets give it
    path: str  # where these facts come from in the YAML, for messages

    @property
    def host_memory_gb(self) -> int | None:
        """In GB, as the sizing counts it."""
        return None if self.host_memory_gib is None else gib_to_gb(self.host_memory_gib)


def effective_instance(
    source: AwsSource, hardware: str, region: str | None
) -> tuple[InstanceType | None, str | None]:
    """(instance type with the stack's overrides applied and the price of its region, problem
    message or None)."""
    catalog = instance_catalog()
    if source.instance_type is None:
        match = [t for t in catalog.values() if t.hardware == hardware]
        if not match:
            label = hardware_catalog()[hardware].label
            return None, f"{label} has no AWS instance type in the catalog; use nodes.source.kind: existing"
        base = match[0]
    elif source.instance_type not in catalog:
        return None, f"{source.instance_type!r} is not in the instance catalog (known: {', '.join(catalog)})"
    else:
        base = catalog[source.instance_type]
    o = source.instance
    # The catalog's listed price of the stack's own region (prices differ by region), dated.
    price = base.prices_by_region.get(region or "")
    price_source = f"{base.price_source} ({region})" if price is not None else None
    price_date = base.price_date if price is not None else None
    if o.price_usd_per_hour is not None:
        price, price_source = o.price_usd_per_hour, "the stack file (nodes.source.instance.priceUsdPerHour)"
        price_date = None
    bought = source.capacity.purchased if isinstance(source.capacity, CapacityBlock) else None
    if bought is not None:
        # The block is paid up front: its price per instance-hour is what the nodes cost.
        price = bought.upfront_price_usd / (bought.instance_count * bought.hours)
        price_source = f"Capacity Block purchase: {bought.price_source}"
        price_date = None
    return (
        replace(
            base,
            host_memory_gib=o.host_memory_gib or base.host_memory_gib,
            efa_network_cards=o.efa_network_cards or base.efa_network_cards,
            price_usd_per_hour=price,
            price_source=price_source,
            price_date=price_date,
        ),
        None,
    )


def node_facts(spec: StackSpec, base: str) -> tuple[list[NodeFacts], list[Problem]]:
    src = spec.nodes.source
    if isinstance(src, KubernetesSource):
        # One pod per recipe node, each with the GPUs of one catalog node; the cluster's host
        # memory is not known offline.
        gpus = hardware_catalog()[spec.hardware].gpus_per_node
        return [NodeFacts(spec.hardware, gpus, None, f"{base}.hardware")] * spec.nodes.count, []
    if isinstance(src, ExistingSource):
        return _existing_host_facts(spec, src, base)
    itype, problem = effective_instance(src, spec.hardware, region=None)  # no price needed here
    if itype is None:
        key = "instanceType" if src.instance_type else "kind"
        return [], [Problem(f"{base}.nodes.source.{key}", problem or "", "instance-type")]
    facts = [
        NodeFacts(itype.hardware, itype.gpus, itype.host_memory_gib, f"{base}.nodes.source.instance")
    ] * spec.nodes.count
    router, node = router_instance(spec, region=None)[0], router_node(spec)
    if router is not None and node is not None:  # the router's CPU instance
        facts[node] = NodeFacts(router.hardware, 0, router.host_memory_gib, f"{base}.cluster.router")
    return facts, []


def _existing_host_facts(
    spec: StackSpec, src: ExistingSource, base: str
) -> tuple[list[NodeFacts], list[Problem]]:
    """Each listed host's GPUs and memory; only the router's own host may leave them out."""
    router_host = spec.cluster.router.host if spec.cluster else None
    facts, problems = [], []
    for i, h in enumerate(src.hosts):
        path = f"{base}.nodes.source.hosts[{i}]"
        if h.address != router_host:
            for key, value in (("gpus", h.gpus), ("hostMemoryGib", h.host_memory_gib)):
                if value is None:
                    problems.append(
                        Problem(
                            f"{path}.{key}",
                            "required on a host that serves the model (only the router's own host, "
                            "cluster.router.host, goes without)",
                            "host-gpus" if key == "gpus" else "host-memory",
                        )
                    )
        facts.append(
            NodeFacts(
                h.gpus.model if h.gpus else None, h.gpus.count if h.gpus else 0, h.host_memory_gib, path
            )
        )
    return facts, problems


def router_instance(spec: StackSpec, region: str | None) -> tuple[InstanceType | None, str | None]:
    """(the AWS CPU instance type of a router on a node of its own, with its region's listed
    price; problem message or None). (None, None): the router has no instance of its own."""
    name = spec.cluster.router.instance_type if spec.cluster else None
    if name is None or not isinstance(spec.nodes.source, AwsSource):
        return None, None
    arch = hardware_catalog()[spec.hardware].arch
    cpu = {n: t for n, t in instance_catalog().items() if t.hardware == "cpu"}
    listed = cpu.get(name)
    if listed is None:
        return None, f"{name!r} is not a CPU instance type of the catalog (known: {', '.join(cpu)})"
    if listed.arch != arch:
        same = ", ".join(n for n, t in cpu.items() if t.arch == arch)
        return None, (
            f"{name} is {listed.arch}, but the router runs the stack's {arch} SGLang image: use {same}"
        )
    price = listed.prices_by_region.get(region or "")
    return replace(
        listed,
        price_usd_per_hour=price,
        price_source=f"{listed.price_source} ({region})" if price is not None else None,
        price_date=listed.price_date if price is not None else None,
    ), None


def _gpus_used(recipe: Recipe, node: int) -> int:
    used = [g for p in recipe.processes if p.node == node for g in p.gpus]
    return max(used) + 1 if used else 0


def hicache_ranks(recipe: Recipe, node: int) -> int:
    """Ranks on the node that keep a host tier (each rank keeps its own)."""
    return sum(len(p.gpus) for p in recipe.processes if p.node == node and HICACHE_FLAG in p.argv)


def check_hosts(spec: StackSpec, recipe: Recipe, facts: list[NodeFacts]) -> list[Problem]:
    problems = []
    for i, f in enumerate(facts):
        if f.gpu_model is not None and f.gpu_model != spec.hardware:
            key = "gpus.model" if isinstance(spec.nodes.source, ExistingSource) else "instanceType"
            where = f.path if key == "gpus.model" else f.path.rsplit(".", 1)[0]
            problems.append(
                Problem(
                    f"{where}.{key}",
                    f"{f.gpu_model} machine, but the stack's hardware is {spec.hardware}",
                    "gpu-model",
                )
            )
        need = _gpus_used(recipe, i)
        if f.gpu_count < need:
            # Kubernetes pods get the catalog's GPUs per node: the stack's hardware is what to change.
            kube = isinstance(spec.nodes.source, KubernetesSource)
            problems.append(
                Problem(
                    f.path if kube else f"{f.path}.gpus.count",
                    f"node {i} runs processes on {need} GPUs but has {f.gpu_count}",
                    "gpu-count",
                )
            )
        if not isinstance(spec.nodes.source, ExistingSource):
            break  # every AWS or Kubernetes GPU node is the same: report once
    return problems


def host_tier_need(spec: StackSpec, recipe: Recipe, node: int) -> int:
    size = recipe.options.hicache_size
    ranks = hicache_ranks(recipe, node)
    if recipe.options.hicache == "off" or size is None or ranks == 0:
        return 0
    return round(host_tier_need_gb(size, ranks))


def check_host_tier(spec: StackSpec, recipe: Recipe, facts: list[NodeFacts], base: str) -> list[Problem]:
    size = recipe.options.hicache_size
    if recipe.options.hicache == "off" or size is None:
        return []
    segment_gb = gib_to_gb(spec.mooncake.global_segment_gib) if spec.mooncake else 0
    for i, f in enumerate(facts):
        ranks = hicache_ranks(recipe, i)
        if ranks == 0:
            continue
        if f.host_memory_gb is None:
            if isinstance(spec.nodes.source, KubernetesSource):
                return []  # the pod's node is the scheduler's choice: a warning says it is unchecked
            return [
                Problem(
                    f"{f.path}.hostMemoryGib",
                    "host memory of this instance type is unknown: set it so the HiCache "
                    "host tier can be checked",
                    "host-memory-unknown",
                )
            ]
        try:
            check_host_tier_fits(size, ranks, f.host_memory_gb, reserved_gb=segment_gb)
        except SizingError as err:
            extra = f" (Mooncake global segment {segment_gb} GB reserved)" if segment_gb else ""
            return [Problem(f"{base}.options.hicache_size", f"node {i}: {err}{extra}", "host-tier-fits")]
    return []


def check_mooncake(spec: StackSpec, recipe: Recipe, base: str) -> list[Problem]:
    l3 = recipe.options.hicache == "l1l2l3"
    mc = spec.mooncake
    if l3 and mc is None:
        return [
            Problem(
                f"{base}.mooncake",
                "hicache l1l2l3 needs the Mooncake L3 tier: add a mooncake block "
                "(masterNode, protocol, globalSegmentGib)",
                "l3-needs-mooncake",
            )
        ]
    if mc is None:
        return []
    if not l3:
        return [
            Problem(
                f"{base}.mooncake",
                "the Mooncake tier is used only with options.hicache: l1l2l3",
                "mooncake-without-l3",
            )
        ]
    problems = []
    if mc.master_node >= spec.nodes.count:
        problems.append(
            Problem(
                f"{base}.mooncake.masterNode",
                f"node {mc.master_node} does not exist (nodes.count is {spec.nodes.count})",
                "mooncake-master",
            )
        )
    problems += _mooncake_port_clashes(recipe, mc, base)
    on_aws = isinstance(spec.nodes.source, AwsSource)
    if on_aws and mc.protocol == "rdma":
        problems.append(
            Problem(
                f"{base}.mooncake.protocol",
                "AWS nodes talk over EFA, not InfiniBand verbs: use efa (or tcp)",
                "mooncake-protocol",
            )
        )
    if isinstance(spec.nodes.source, ExistingSource) and mc.protocol == "efa":
        problems.append(
            Problem(
                f"{base}.mooncake.protocol",
                "efa is the AWS fabric; existing hosts use rdma (or tcp)",
                "mooncake-protocol",
            )
        )
    return problems


# A port every node already uses besides the recipe's and the Mooncake master's.
_RESERVED_PORTS = {22: "sshd"}


def recipe_ports(recipe: Recipe) -> dict[int, str]:
    """Every port the recipe's processes listen on or rendezvous at, with who uses it."""
    ports: dict[int, str] = {}
    for p in recipe.processes:
        if p.port:
            ports[p.port] = f"the {p.name} process"
        for flag, value in zip(p.argv, p.argv[1:], strict=False):
            if flag.startswith("--") and flag.endswith("-port") and value.isdigit():
                ports[int(value)] = f"{p.name} {flag}"
            elif flag == "--dist-init-addr" and value.rpartition(":")[2].isdigit():
                ports[int(value.rpartition(":")[2])] = f"{p.name} {flag}"
            elif flag == "--remote-instance-weight-loader-send-weights-group-ports":
                # peer_load: bound on the seed replica's node, one a TP rank
                for port in value.strip("[]").split(","):
                    ports[int(port)] = f"{p.name}'s seed {flag}"
    return ports


def _mooncake_port_clashes(recipe: Recipe, mc: Mooncake, base: str) -> list[Problem]:
    taken = {**_RESERVED_PORTS, **recipe_ports(recipe)}
    problems: list[Problem] = []
    # The metrics port first (against sshd and the recipe), then it is taken for the other two.
    for key, port in (
        ("metricsPort", mc.metrics_port),
        ("rpcPort", mc.rpc_port),
        ("metadataPort", mc.metadata_port),
    ):
        if port in taken:
            problems.append(
                Problem(f"{base}.mooncake.{key}", f"port {port} is taken by {taken[port]}", "port-collision")
            )
        taken.setdefault(mc.metrics_port, "the Mooncake master's metrics (mooncake.metricsPort)")
    return problems


def check_api_key(spec: StackSpec, recipe: Recipe, base: str) -> list[Problem]:
    """serving.apiKey: required only where the key can reach the server in a root-only file."""
    if spec.serving.api_key != "required":
        return []
    path = f"{base}.serving.apiKey"
    if isinstance(spec.nodes.source, KubernetesSource):
        return [
            Problem(
                path,
                "not offered on Kubernetes stacks yet: put the cluster's authenticating ingress in "
                "front of the Service",
                "api-key-source",
            )
        ]
    if any(p.role == "router" for p in recipe.processes):
        pd = any(p.role in ("prefill", "decode") for p in recipe.processes)
        router, stacks = ("the PD router", "PD stacks") if pd else ("the cluster's router", "cluster stacks")
        return [
            Problem(
                path,
                f"{router} serves the API here and reads its flags from argv only, where the key "
                f"would show in every process list; keep {stacks} behind the firewall",
                "api-key-topology",
            )
        ]
    return []


def check_peer_load(spec: StackSpec, recipe: Recipe, base: str) -> list[Problem]:
    """options.peer_load: a replica's server starts only once its seed answers, which the host
    roles' units wait for; a Kubernetes pod has nothing that waits. Over the TransferEngine the
    loader reads with Mooncake's RDMA transport (SGLang's MOONCAKE_PROTOCOL default, rdma: verbs
    over InfiniBand or RoCE), which AWS nodes' EFA does not offer; NCCL runs there."""
    path = f"{base}.options.peer_load"
    if recipe.options.peer_load == "off":
        return []
    if isinstance(spec.nodes.source, KubernetesSource):
        return [
            Problem(
                path,
                "not offered on Kubernetes stacks yet: nothing makes a replica's pod wait for the replica "
                "it loads from",
                "peer-load-source",
            )
        ]
    if isinstance(spec.nodes.source, AwsSource) and recipe.options.peer_load == "on":
        return [
            Problem(
                path,
                "on loads over Mooncake's TransferEngine with RDMA verbs, which AWS nodes' EFA does not "
                "offer: set nccl (each replica loads from the one before it; the seed pauses serving "
                "while it sends)",
                "peer-load-fabric",
            )
        ]
    return []


def check_router_program(spec: StackSpec, recipe: Recipe, base: str) -> list[Problem]:
    """options.router: smg comes with the derived image; the release image has only its own
    sglang_router, which a stack with image.derived false runs."""
    if spec.image.derived or recipe.options.router != "smg":
        return []
    if not any(p.role == "router" for p in recipe.processes):
        return []
    return [
        Problem(
            f"{base}.options.router",
            "smg is installed by the derived image; with image.derived false the release image's "
            "own sglang_router runs (leave router out, or set image.derived true)",
            "router-program-image",
        )
    ]


def check_host_keys_pinned(spec: StackSpec, base: str) -> list[Problem]:
    """The HF token (and the API key) go to existing hosts only once their SSH keys are pinned
    (or the stack says, in so many words, to send them to whoever answers)."""
    src = spec.nodes.source
    if not isinstance(src, ExistingSource) or src.allow_unpinned_host_keys:
        return []
    return [
        Problem(
            f"{base}.nodes.source.hosts[{i}].hostKeys",
            "no host key pinned: the stack's secrets would go to whichever machine answers at "
            f"{host.address}; list its keys (cat /etc/ssh/ssh_host_ed25519_key.pub on it) or set "
            "nodes.source.allowUnpinnedHostKeys: true",
            "host-key-unpinned",
        )
        for i, host in enumerate(src.hosts)
        if not host.host_keys
    ]


def check_recipe_names(data: object, base: str) -> list[Problem]:
    """Hardware, strategy, topology and every option of a stack's spec (parsed or raw), each bad
    one at once: the recipe engine would stop at the first, and a spec that fails its own shape
    check still gets these named beside its other problems."""
    if not isinstance(data, Mapping):
        return []
    options = data.get("options")
    errors = name_errors(
        data.get("hardware"),
        data.get("strategy"),
        data.get("topology", "unified"),
        options if isinstance(options, Mapping) else {},
    )
    return [Problem(f"{base}.{recipe_path(None, e.field)}", e.message, e.rule) for e in errors]


def check_image(spec: StackSpec, recipe: Recipe, base: str) -> list[Problem]:
    try:
        check_build_requirements(recipe, spec.image)
        image_packages(spec.image.version, hardware_catalog()[spec.hardware], spec.image.packages)
    except RecipeError as err:
        return [Problem(f"{base}.image", err.message.removeprefix("image: "), err.rule)]
    except ImagePinError as err:  # a pin the release or torchcodec's table contradicts
        return [Problem(f"{base}.{err.field}", err.message, "image-packages")]
    return []


def check_root_volume(spec: StackSpec, need_gib: int, base: str) -> list[Problem]:
    src = spec.nodes.source
    if isinstance(src, AwsSource) and src.root_volume_gib is not None and src.root_volume_gib < need_gib:
        return [
            Problem(
                f"{base}.nodes.source.rootVolumeGib",
                f"{src.root_volume_gib} GiB is below the {need_gib} GiB the image and weights need",
                "root-volume",
            )
        ]
    return []


def check_kubernetes(stack: str, spec: StackSpec, base: str) -> list[Problem]:
    """Render the manifests now, so `validate` reports what `pulumi up` would refuse."""
    if not isinstance(spec.nodes.source, KubernetesSource):
        return []
    if spec.image.derived:
        return [
            Problem(
                f"{base}.image.derived",
                "the derived image is built on each host by the sglang_image role; a Kubernetes "
                "cluster pulls its images: set image.derived: false to run the pinned upstream release",
                "kubernetes-derived-image",
            )
        ]
    try:
        kubernetes_plan(stack, spec)
    except KubernetesRenderError as err:
        # Its field is relative to the stack spec; "stack" is the stack's own name.
        path = base if err.field == "stack" else f"{base}.{err.field}"
        return [Problem(path, err.message, "kubernetes")]
    except RecipeError as err:
        return [recipe_problem(spec, err, base)]
    return []


def check_cluster(spec: StackSpec, base: str) -> list[Problem]:
    """The node count adds up to the cluster's instances."""
    cluster = spec.cluster
    if cluster is None:
        return []
    problems = []
    host = cluster.router.host
    src = spec.nodes.source
    if host is not None and not isinstance(src, ExistingSource):
        problems.append(
            Problem(
                f"{base}.cluster.router.host",
                "a router host of its own is one of the existing hosts (nodes.source.kind: existing); "
                "on AWS give it a CPU instance (cluster.router.instanceType); on Kubernetes leave it unset",
                "router-host-source",
            )
        )
    elif host is not None and isinstance(src, ExistingSource) and host not in [h.address for h in src.hosts]:
        problems.append(
            Problem(
                f"{base}.cluster.router.host",
                f"{host} is not one of nodes.source.hosts (their address)",
                "router-host-unknown",
            )
        )
    if cluster.router.instance_type is not None and not isinstance(src, AwsSource):
        problems.append(
            Problem(
                f"{base}.cluster.router.instanceType",
                "a router instance of its own is an AWS node (nodes.source.kind: aws); on existing "
                "hosts name one with cluster.router.host",
                "router-instance-source",
            )
        )
    else:
        _, problem = router_instance(spec, region=None)
        if problem is not None:
            problems.append(Problem(f"{base}.cluster.router.instanceType", problem, "router-instance-type"))
    need = cluster.node_count()
    if need != spec.nodes.count:
        problems.append(
            Problem(
                f"{base}.nodes.count",
                f"count is {spec.nodes.count} but the cluster needs {need} nodes ({cluster.shape_text()})",
                "cluster-node-count",
            )
        )
    return problems


def check_capacity_block_fit(spec: StackSpec, base: str) -> list[Problem]:
    """`ttl: block` only on block stacks; a recorded block sits in the stack's availability zone."""
    src = spec.nodes.source
    block = src.capacity if isinstance(src, AwsSource) and isinstance(src.capacity, CapacityBlock) else None
    if spec.ttl == BLOCK_TTL and block is None:
        return [Problem(f"{base}.ttl", "`block` is the TTL of Capacity Block stacks only", "ttl-block")]
    if spec.ttl == BLOCK_TTL and block is not None and block.purchased is None:
        # Known at `pulumi up` from the live reservation; offline there is no end to show.
        return []
    bought = block.purchased if block else None
    if bought is None or not isinstance(src, AwsSource):
        return []
    problems = []
    if isinstance(src.network, NewNetwork) and src.network.availability_zone != bought.availability_zone:
        problems.append(
            Problem(
                f"{base}.nodes.source.network.availabilityZone",
                f"{src.network.availability_zone}, but the block bought is in {bought.availability_zone}",
                "capacity-zone",
            )
        )
    if bought.instance_count < spec.gpu_node_count:
        problems.append(
            Problem(
                f"{base}.nodes.count",
                f"{spec.gpu_node_count} GPU nodes, but the block bought holds "
                f"{bought.instance_count} instances",
                "capacity-count",
            )
        )
    return problems


def locked_image(spec: StackSpec, lock: StackLock | None, base: str) -> tuple[StackSpec, list[Problem]]:
    """The spec with the lock's image digest, so that every node pulls and runs the image by it
    (a tag moved since locking is not what runs); a stack whose own image.digest disagrees with
    its lock is refused."""
    tagged = spec.image.tagged_ref(hardware_catalog()[spec.hardware])
    entry = lock.images.get(tagged) if lock is not None else None
    if entry is None or spec.image.digest == entry.digest:
        return spec, []
    if spec.image.digest is not None:
        assert lock is not None
        detail = (
            f"{spec.image.digest} is not the {entry.digest} that {lock_file_name(lock.stack)} pins for "
            f"{tagged}: drop one, or run `flashfleet lock {lock.stack} --update`"
        )
        return spec, [Problem(f"{base}.image.digest", detail, "lock-image")]
    return spec.model_copy(update={"image": spec.image.model_copy(update={"digest": entry.digest})}), []


def check_lock(
    stack: str,
    spec: StackSpec,
    recipe: Recipe,
    lock: StackLock | None,
    base: str,
    *,
    site_args: Mapping[str, object] | None = None,
    router_arch: str | None = None,
    region: str | None = None,
) -> tuple[list[Problem], list[str]]:
    """The stack's lock against what its recipe downloads and the image its nodes pull:
    (problems, warnings). A missing or stale lock refuses a `lock: required` stack and is a
    warning otherwise. `spec` is the one `locked_image` returned; `site_args` (the stack's) move
    what the nodes install (a mirror, another version), so what the lock must pin; `router_arch`:
    a router's own AWS instance's, whose Docker Engine and AMI the lock pins too; `region`: the
    stack's, where the lock's AMI ids hold."""
    name = lock_file_name(stack)
    installs = packages.pip_installs(spec, site_args)
    unfit = [
        Problem(f"{base}.lock", f"{name} {what}: run `flashfleet lock {stack} --update`", "lock-platform")
        for what in packages.no_wheel(installs, lock)
    ]
    if unfit:
        return unfit, []
    unlocked = [r for r in recipe.repositories if lock is None or r not in lock.weights]
    if spec.image.digest is None:  # neither the stack nor its lock pins the image
        unlocked.append("the image's tag")  # `plan` names it (a value kept whole, not in prose)
    unlocked += packages.unlocked(installs, lock)
    unlocked += [
        f"the {part}'s apt packages"
        for part in apt_packages.unlocked(apt_packages.node_apt(spec, site_args, router_arch), lock)
    ]
    hw = hardware_catalog()[spec.hardware]
    if spec.image.derived and image_apt.image_apt_lock(spec, hw, site_args or {}, lock) is None:
        unlocked.append("the derived image's apt packages")
    unlocked += node_images.unlocked_images(node_images.node_images(spec, hw.arch, region, router_arch, lock))
    if not unlocked:
        return [], []
    if lock is None:
        what = f"no {name}: the nodes fetch {', '.join(unlocked)} as each is on the day"
    else:
        what = f"{name} does not pin {', '.join(unlocked)} (the stack changed since it was written)"
    fix = f"run `flashfleet lock {stack}{' --update' if lock is not None else ''}`"
    if spec.lock == "required":
        return [Problem(f"{base}.lock", f"required, but {what}: {fix}", "lock-required")], []
    return [], [f"not repeatable: {what}; {fix}"]
