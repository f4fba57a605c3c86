"""The whole bring-up of a stack, resolved offline: nodes, recipe, launches, Mooncake, cost.

``load_stack`` is the one entry point: it reads the file, validates the spec strictly, runs every
cross-field check and returns a ``StackPlan`` (or raises ``StackError`` listing each problem with
its YAML path). ``plan``, ``validate`` and the Pulumi program all start here, before any resource
is registered. Pure: imports neither pulumi nor boto3 nor ansible.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flashfleet.catalog import hardware_catalog
from flashfleet.catalog.instances import GIB_TO_GB, InstanceType, disk_figures
from flashfleet.launch import ContainerLaunch, LaunchSettings, container_launches
from flashfleet.planning import checks
from flashfleet.planning.node_images import NodeImage, node_images
from flashfleet.planning.stack_recipe import launch_settings, recipe_problem, render_stack, router_node
from flashfleet.planning.weights_snapshot import WeightsSnapshotPlan, weights_snapshot
from flashfleet.recipes import Recipe, RecipeError
from flashfleet.recipes.layouts import SERVE_PORT
from flashfleet.stack import capacity_block
from flashfleet.stack.capacity_block import PLACEHOLDER_RESERVATION
from flashfleet.stack.errors import STACK_KEY, Problem, StackError, from_validation_error
from flashfleet.stack.files import DEFAULT_STACKS_DIR, REGION_KEY, StackFile, read_stack_file
from flashfleet.stack.inert_text import all_not_inert, path_text
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.lock import StackLock
from flashfleet.stack.namespaces import namespace_clash
from flashfleet.stack.spec import AwsSource, ExistingSource, NewNetwork, StackSpec

SSH_PORT = 22


@dataclass(frozen=True)
class NodePlan:
    index: int
    name: str  # resource and inventory host name
    role: str  # the recipe roles on the node (+ mooncake-master), the flashfleet:role tag
    instance_type: str | None  # AWS only
    address: str | None  # existing hosts: known now; AWS: known after creation; Kubernetes: none
    private_address: str | None
    ssh_user: str  # "-" on Kubernetes
    gpu_count: int
    host_memory_gb: int | None
    host_memory_gib: int | None  # as given: the stack file's hostMemoryGib, the instance sheet's
    hicache_host_gb: int
    mooncake_master: bool
    host_keys: tuple[str, ...] = ()  # existing hosts: the SSH keys to pin

    @property
    def gpu_node(self) -> bool:
        """False on a router's own host (cluster.router.host): it runs the router (and at most the
        Mooncake master), no GPU server, so it gets no GPU driver, container toolkit or weights."""
        return not set(self.role.split("+")) <= {"router", "mooncake-master"}


@dataclass(frozen=True)
class StackPlan:
    stack: str
    spec: StackSpec
    region: str | None
    has_hf_token: bool
    recipe: Recipe  # rendered with symbolic addresses (node-0, node-1, ...)
    instance: InstanceType | None
    nodes: tuple[NodePlan, ...]
    root_volume_gib: int | None
    warnings: tuple[str, ...]
    has_api_key: bool = False  # the stack file holds the flashfleet:apiKey secret
    # AWS: the CPU instance of a cluster's router on a node of its own (the last node), or None.
    router_instance: InstanceType | None = None
    lock: StackLock | None = None  # <stack>.lock.yaml (flashfleet.stack.lock); checked against the recipe
    # caches.weightsSnapshot (AWS): the weights volume kept as an EBS snapshot between bring-ups
    weights_snapshot: WeightsSnapshotPlan | None = None
    # the role arguments the stack's site section sets (flashfleet.stack.site): every play gets
    # them, and some move what the lock must pin (a mirror, another Docker release)
    site_args: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint_node(self) -> int:
        """The node whose serving port is the stack's endpoint: a cluster's router's (node 0 unless
        cluster.router.host gives it a host of its own), else node 0."""
        routers = [p.node for p in self.recipe.processes if p.role == "router" and p.workers]
        return routers[0] if routers else 0

    @property
    def api_key_required(self) -> bool:
        """serving.apiKey: required: the OpenAI API demands `Authorization: Bearer <key>`."""
        return self.spec.serving.api_key == "required"

    @property
    def vendor(self) -> str:
        return hardware_catalog()[self.spec.hardware].vendor

    @property
    def arch(self) -> str:
        return hardware_catalog()[self.spec.hardware].arch

    @property
    def router_arch(self) -> str | None:
        """The architecture of a router's own AWS instance; None without one."""
        return self.router_instance.arch if self.router_instance is not None else None

    @property
    def node_images(self) -> list[NodeImage]:
        """The AMIs an AWS stack's instances boot, and what pins each (planning/node_images.py)."""
        return node_images(self.spec, self.arch, self.region, self.router_arch, self.lock)

    @property
    def serving_port(self) -> int:
        return SERVE_PORT

    @property
    def router_root_volume_gib(self) -> int | None:
        """A router's CPU node holds the image and no weights: the allowance for the image."""
        if self.router_instance is None:
            return None
        return math.ceil(disk_figures().allowance_gb / GIB_TO_GB)

    @property
    def gpu_nodes(self) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.gpu_node)

    @property
    def hourly_cost_usd(self) -> float | None:
        """Every node's price, or None when one is unknown (never a part passed off as the whole)."""
        if self.instance is None or self.instance.price_usd_per_hour is None:
            return None
        gpu_nodes = self.instance.price_usd_per_hour * len(self.gpu_nodes)
        if self.router_instance is None:
            return gpu_nodes
        router = self.router_instance.price_usd_per_hour
        return None if router is None else gpu_nodes + router

    @property
    def cost_parts(self) -> tuple[float | None, list[str]]:
        """(the hourly price of the nodes that have one, None if none has; each node kind
        without a price, named): what `plan` shows when the whole is unknown."""
        if self.instance is None:
            return None, []
        kinds = [(self.instance, len(self.gpu_nodes), "GPU nodes")]
        if self.router_instance is not None:
            kinds.append((self.router_instance, 1, "the router's node"))
        known, missing = None, []
        for itype, count, what in kinds:
            if itype.price_usd_per_hour is None:
                where = f"in {self.region}" if self.region else "in this region"
                listed = ", ".join(sorted(itype.prices_by_region))
                also = f" (listed for {listed})" if listed else ""
                missing.append(f"{count} x {itype.name} ({what}): no price {where}{also}")
            else:
                known = (known or 0.0) + itype.price_usd_per_hour * count
        return known, missing

    @property
    def price_source(self) -> str | None:
        """Where the hourly price comes from (a purchased block, the stack, or the catalog)."""
        if self.hourly_cost_usd is None or self.instance is None:
            return None
        if self.router_instance is not None:
            r = self.router_instance
            return f"{self.instance.price_source}; router {r.name}: {r.price_source}"
        return self.instance.price_source

    @property
    def needs_capacity_purchase(self) -> bool:
        """Still the placeholder reservation: `pulumi up` refuses until `flashfleet capacity buy`."""
        return capacity_block.needs_purchase(self.spec)

    def launch_settings(self) -> LaunchSettings:
        return launch_settings(
            self.spec,
            api_key=self.api_key_required,
            lock=self.lock,
        )

    def recipe_for(self, private_addresses: Sequence[str] | None = None) -> Recipe:
        """The recipe with the nodes' real addresses (multi-node rendezvous), or symbolic ones."""
        if private_addresses is None:
            return self.recipe
        return render_stack(self.spec, list(private_addresses))

    def launches_by_node(
        self, private_addresses: Sequence[str] | None = None
    ) -> dict[int, list[ContainerLaunch]]:
        return self.node_launches(self.recipe_for(private_addresses))

    def node_launches(self, recipe: Recipe) -> dict[int, list[ContainerLaunch]]:
        """Each node's containers, from a recipe already rendered (``recipe_for``)."""
        launches = container_launches(recipe, self.launch_settings())
        out: dict[int, list[ContainerLaunch]] = {n.index: [] for n in self.nodes}
        for launch in launches:
            out[launch.node].append(launch)
        return out


def load_stack(name: str, stacks_dir: Path = DEFAULT_STACKS_DIR) -> StackPlan:
    """Read, validate and resolve ``stacks/Pulumi.<name>.yaml``; raise StackError if refused."""
    return resolve(read_stack_file(name, stacks_dir))


def resolve(sf: StackFile) -> StackPlan:
    spec = parse_spec(sf.name, sf.spec_data)
    if clash := namespace_clash(sf):
        raise StackError(sf.name, [Problem(f"{STACK_KEY}.nodes.source.namespace", clash, "kubernetes")])
    return resolve_spec(
        sf.name, spec, region=sf.region, has_hf_token=sf.has_hf_token, has_api_key=sf.has_api_key,
        lock=sf.lock,
    )  # fmt: skip


def parse_spec(stack: str, data: Any) -> StackSpec:
    # Free text: a string Ansible would evaluate, or one that would split a line, is refused
    # whatever field holds it (flashfleet.stack.inert_text); a field with a shape of its own
    # (a host path, an address) is named by its own rule instead.
    inert = [
        Problem(STACK_KEY + (f".{path_text(where)}" if where else ""), why, "inert-text")
        for where, why in all_not_inert(data)
    ]
    try:
        spec = StackSpec.model_validate(data)
    except ValidationError as err:
        problems = from_validation_error(err, data)
        seen = {p.path for p in problems}
        # one problem a place: a field (or a mapping above it) its own rule already refuses
        problems += [
            p for p in inert if not any(p.path == s or p.path.startswith((f"{s}.", f"{s}[")) for s in seen)
        ]
        seen |= {p.path for p in inert}
        # the recipe's names are read from the raw spec too: every problem at once, not a stage a run
        problems += [p for p in checks.check_recipe_names(data, STACK_KEY) if p.path not in seen]
        raise StackError(stack, problems) from None
    if inert:
        raise StackError(stack, inert)
    return spec


def resolve_spec(
    stack: str,
    spec: StackSpec,
    *,
    region: str | None,
    has_hf_token: bool,
    has_api_key: bool = False,
    lock: StackLock | None = None,
) -> StackPlan:
    base = STACK_KEY
    recipe_names = {"hardware": spec.hardware, "strategy": spec.strategy, "topology": spec.topology}
    problems = checks.check_recipe_names({**recipe_names, "options": spec.options}, base)
    if isinstance(spec.nodes.source, AwsSource) and not region:
        problems.append(Problem(REGION_KEY, "AWS stacks set the region: `aws:region: us-east-2`", "region"))
    src = spec.nodes.source
    if isinstance(src, AwsSource) and region and isinstance(src.network, NewNetwork):
        zone = src.network.availability_zone
        # A zone's name starts with its region's (us-east-2a, us-west-2-lax-1a); EC2 would refuse
        # the subnet only after the VPC exists.
        if not re.fullmatch(re.escape(region) + r"(-[a-z]+-\d+)?[a-z]", zone):
            problems.append(
                Problem(
                    f"{base}.nodes.source.network.availabilityZone",
                    f"{zone} is not a zone of the stack's region {region} ({REGION_KEY})",
                    "zone-in-region",
                )
            )
    problems += checks.check_cluster(spec, base)
    if problems:
        raise StackError(stack, problems)
    try:
        recipe = render_stack(spec)
    except RecipeError as err:
        raise StackError(stack, [recipe_problem(spec, err, base)]) from None
    facts, problems = checks.node_facts(spec, base)
    if not problems:
        problems += checks.check_hosts(spec, recipe, facts)
        problems += checks.check_host_tier(spec, recipe, facts, base)
    problems += checks.check_mooncake(spec, recipe, base)
    spec, image_problems = checks.locked_image(spec, lock, base)
    problems += image_problems
    router, _ = checks.router_instance(spec, region)
    site_args = spec.site.role_args()
    # the image's packages first: what the lock must pin follows from them, so a stack whose
    # pins are refused has no lock to judge (its other image problems do not stop that check)
    build_problems = checks.check_image(spec, recipe, base)
    problems += build_problems
    lock_warnings: list[str] = []
    if not any(p.rule == "image-packages" for p in build_problems):
        lock_problems, lock_warnings = checks.check_lock(
            stack, spec, recipe, lock, base, site_args=site_args, router_arch=router.arch if router else None,
            region=region,
        )  # fmt: skip
        problems += lock_problems
    snapshot, snapshot_problems = weights_snapshot(stack, spec, recipe, lock, base)
    problems += snapshot_problems
    problems += checks.check_api_key(spec, recipe, base)
    problems += checks.check_peer_load(spec, recipe, base)
    problems += checks.check_router_program(spec, recipe, base)
    if has_hf_token or spec.serving.api_key == "required":
        problems += checks.check_host_keys_pinned(spec, base)
    if not problems:  # the manifests render from a recipe every other check accepted
        problems += checks.check_kubernetes(stack, spec, base)
    src = spec.nodes.source
    root_gib = None
    instance = None
    if isinstance(src, AwsSource):
        root_gib = src.root_volume_gib or _root_volume_gib(recipe.options.precision)
        problems += checks.check_root_volume(spec, _root_volume_gib(recipe.options.precision), base)
        instance, _ = checks.effective_instance(src, spec.hardware, region)
        if instance is not None and instance.capacity == "block-only" and src.capacity.kind != "block":
            problems.append(
                Problem(
                    f"{base}.nodes.source.capacity",
                    f"{instance.name} is sold as Capacity Blocks only: set capacity: "
                    "{kind: block, reservationId: cr-...} with the id of your block",
                    "capacity-block-required",
                )
            )
    problems += checks.check_capacity_block_fit(spec, base)
    if problems:
        raise StackError(stack, problems)
    nodes = tuple(_node_plans(stack, spec, recipe, facts, instance=instance, router=router))
    return StackPlan(
        stack=stack,
        spec=spec,
        region=region,
        has_hf_token=has_hf_token,
        recipe=recipe,
        instance=instance,
        nodes=nodes,
        root_volume_gib=root_gib,
        warnings=tuple(
            _warnings(stack, spec, recipe, instance, has_hf_token)
            + _api_key_warnings(spec, has_api_key)
            + _token_warnings(spec, has_hf_token)
            + _code_flag_warnings(spec, recipe)
            + lock_warnings
        ),
        has_api_key=has_api_key,
        router_instance=router,
        lock=lock,
        weights_snapshot=snapshot,
        site_args=site_args,
    )


def _root_volume_gib(precision: str) -> int:
    return math.ceil(disk_figures().root_volume_gb(precision) / GIB_TO_GB)


def _node_plans(
    stack: str,
    spec: StackSpec,
    recipe: Recipe,
    facts: list[checks.NodeFacts],
    *,
    instance: InstanceType | None,
    router: InstanceType | None,
) -> list[NodePlan]:
    src = spec.nodes.source
    router_at = router_node(spec) if router is not None else None
    # On Kubernetes the Mooncake master is a Deployment of its own, on no serving node.
    kube = isinstance(src, KubernetesSource)
    master = spec.mooncake.master_node if spec.mooncake and not kube else None
    plans = []
    for i in range(spec.nodes.count):
        roles = [p.role for p in recipe.start_order() if p.node == i]
        if master == i:
            roles.append("mooncake-master")
        host = src.hosts[i] if isinstance(src, ExistingSource) else None
        node_type = router if i == router_at else instance
        ssh_user = host.ssh_user if host else "ubuntu"  # the DLAMI's user
        if kube:
            ssh_user = "-"  # pods: nothing to log in to
        plans.append(
            NodePlan(
                index=i,
                name=f"{stack}-node-{i}",
                role="+".join(dict.fromkeys(roles)),
                instance_type=node_type.name if node_type else None,
                address=host.address if host else None,
                private_address=(host.private_address or host.address) if host else None,
                ssh_user=ssh_user,
                gpu_count=facts[i].gpu_count,
                host_memory_gb=facts[i].host_memory_gb,
                host_memory_gib=facts[i].host_memory_gib,
                hicache_host_gb=checks.host_tier_need(spec, recipe, i),
                mooncake_master=master == i,
                host_keys=host.host_keys if host else (),
            )
        )
    return plans


def _warnings(
    stack: str, spec: StackSpec, recipe: Recipe, instance: InstanceType | None, has_hf_token: bool
) -> list[str]:
    out = []
    if recipe.badge != "Verified":
        out.append(f"badge {recipe.badge}: {recipe.badge_source}")
    if instance is not None and instance.unknown:
        unknown = [k for k in instance.unknown if getattr(instance, k) is None]
        if unknown:
            out.append(f"{instance.name}: unverified/unknown in the catalog: {', '.join(unknown)}")
        if "efa_network_cards" in unknown:
            out.append(
                "EFA network cards are read from the EC2 API at deploy time (aws ec2 describe-instance-types)"
            )
    src = spec.nodes.source
    if capacity_block.reservation_id(spec) == PLACEHOLDER_RESERVATION:
        out.append(capacity_needed(stack, spec))
    if isinstance(src, KubernetesSource) and recipe.options.hicache != "off":
        out.append(
            "HiCache host tier not checked against host memory: the scheduler picks the Kubernetes "
            "nodes (give the GPU nodes room for it)"
        )
    elif recipe.options.hicache != "off" and recipe.options.hicache_size is None:
        out.append(
            "HiCache host tier sized by SGLang's ratio: set options.hicache_size "
            "to have it checked against host memory"
        )
    if not has_hf_token:
        out.append(
            "no flashfleet:hfToken secret: gated repositories (the DFlash2 draft) cannot be downloaded"
        )
    return out


# extra_args flags that run code the operator did not write: what a plan must say aloud
_CODE_FLAGS = {
    "--trust-remote-code": "the servers run Python code from the model repository",
    "--enable-custom-logit-processor": "every client may send a logit processor, Python code the servers run",
}


def _code_flag_warnings(spec: StackSpec, recipe: Recipe) -> list[str]:
    keyless = spec.serving.api_key != "required"
    out = []
    for word in recipe.options.extra_args:
        flag = word.split("=", 1)[0]
        if flag in _CODE_FLAGS:
            who = (
                " (no API key: anyone who reaches the endpoint)"
                if keyless and "client" in _CODE_FLAGS[flag]
                else ""
            )
            out.append(f"options.extra_args {flag}: {_CODE_FLAGS[flag]}{who}")
    return out


def _token_warnings(spec: StackSpec, has_hf_token: bool) -> list[str]:
    """Where the HF token goes when the stack names an http mirror (docs/security.md): nowhere,
    unless the stack says to send it in clear text."""
    endpoint = spec.site.hub.endpoint
    if not has_hf_token or endpoint is None or not endpoint.lower().startswith("http://"):
        return []
    if spec.site.hub.token_over_http:
        return [f"the HF token goes to {endpoint} in clear text (site.hub.tokenOverHttp)"]
    return [f"the HF token is not sent to {endpoint} (not https): gated repositories cannot be downloaded"]


def _api_key_warnings(spec: StackSpec, has_api_key: bool) -> list[str]:
    """Serving left open, or a key asked for and not at hand (docs/security.md, "API key")."""
    # required with no key is refused by the admission (flashfleet.admission), not warned of
    required = spec.serving.api_key == "required"
    if not required and has_api_key:
        return ["flashfleet:apiKey is set but serving.apiKey is off: the servers accept anyone"]
    src = spec.nodes.source
    if isinstance(src, KubernetesSource) and src.service_type == "LoadBalancer":
        ranges = ", ".join(str(c) for c in src.load_balancer_source_ranges)
        return [
            f"serviceType LoadBalancer: port {SERVE_PORT} answers anyone from {ranges}, with no API key "
            "(none on Kubernetes); keep the ranges to your clients (docs/security.md)"
        ]
    if not required and isinstance(spec.nodes.source, ExistingSource):
        return [
            f"serving is open: port {SERVE_PORT} answers anyone who reaches it, with no API key; set "
            "serving.apiKey: required and the flashfleet:apiKey secret, and firewall the serving and "
            "Mooncake ports (docs/security.md)"
        ]
    return []


def capacity_needed(stack: str, spec: StackSpec) -> str:
    """What a stack with the placeholder reservation needs before `pulumi up` (one line)."""
    if capacity_block.block(spec) is not None:
        return (
            f"capacity: no Capacity Block bought yet (reservationId is the placeholder "
            f"{PLACEHOLDER_RESERVATION}): run `flashfleet capacity offers {stack}`, then "
            f"`flashfleet capacity buy {stack} --offering ID`; `pulumi up` refuses until then"
        )
    return (
        f"capacity: reservationId is the placeholder {PLACEHOLDER_RESERVATION}: put the id of your "
        "On-Demand Capacity Reservation; `pulumi up` refuses until then"
    )
