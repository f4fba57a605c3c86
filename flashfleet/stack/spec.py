"""The stack spec: everything under ``flashfleet:stack`` in ``stacks/Pulumi.<stack>.yaml``.

Strict (unknown keys refused), frozen, camelCase keys as in the YAML, node sources discriminated
by ``nodes.source.kind``. Secrets never live here: the HF token is its own secret config key.
Imports only the catalog and its sibling spec modules. Cross-field checks that need the recipe
engine live in the planning layer (``flashfleet.planning.checks``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from ipaddress import IPv4Network, IPv6Network
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flashfleet.stack import safe_values
from flashfleet.stack.image import ImageSpec
from flashfleet.stack.ingress import parse_cidr, require_public_opt_in
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.site import Site
from flashfleet.stack.strict import Strict
from flashfleet.stack.thresholds import Thresholds

_TTL = re.compile(r"^(\d+)([mhd])$")
_TTL_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
MIN_TTL = timedelta(minutes=15)
MAX_TTL = timedelta(days=14)


BLOCK_TTL = "block"  # until the Capacity Block's end, less the margin AWS terminates instances by


def _parse_ttl(raw: object) -> timedelta | str:
    if isinstance(raw, timedelta) or raw == BLOCK_TTL:
        return raw
    match = _TTL.fullmatch(str(raw).strip()) if isinstance(raw, str) else None
    if not match:
        raise ValueError("must be a duration such as 45m, 8h or 2d (or `block` on a Capacity Block stack)")
    try:
        value = timedelta(**{_TTL_UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        value = MAX_TTL * 2  # far beyond any bound: refused just below
    if not MIN_TTL <= value <= MAX_TTL:
        raise ValueError(f"must be between {MIN_TTL.seconds // 60}m and {MAX_TTL.days}d")
    return value


Ttl = Annotated[timedelta | Literal["block"], BeforeValidator(_parse_ttl)]

OptionValue = str | int | float | bool | list[str] | None

# --- AWS node source -----------------------------------------------------------------------------

_AWS_ID = {
    "vpc": re.compile(r"^vpc-[0-9a-f]{8,17}$"),
    "subnet": re.compile(r"^subnet-[0-9a-f]{8,17}$"),
    "cr": re.compile(r"^cr-[0-9a-f]{8,17}$"),
    "ami": re.compile(r"^ami-[0-9a-f]{8,17}$"),
}


def _aws_id(kind: str) -> AfterValidator:
    def check(value: str) -> str:
        if not _AWS_ID[kind].fullmatch(value):
            raise ValueError(f"{value!r} is not a {kind}-... id")
        return value

    return AfterValidator(check)


def _safe(check: Any) -> AfterValidator:
    """A flashfleet.stack.safe_values check as a field validator."""
    return AfterValidator(check)


HostPath = Annotated[str, AfterValidator(safe_values.host_path)]
# Every switch below is a StrictBool: `true` or `false`, never "yes" or 1 (an opt-in such as
# allowPublicIngress must be meant, and `keepCaches: 0` must not delete the cache by accident).
# Upper bounds: a value far beyond any real machine is a typo, and some of them size lists.
MAX_HOST_MEMORY_GIB = 65536
MAX_GPUS = 64
MAX_EFA_CARDS = 32


class NewNetwork(Strict):
    """A VPC with one public subnet, an internet gateway and a default route (for pulls)."""

    kind: Literal["new"]
    cidr: IPv4Network = IPv4Network("10.42.0.0/16")
    subnet_cidr: IPv4Network = IPv4Network("10.42.0.0/20")
    availability_zone: Annotated[str, _safe(safe_values.availability_zone)]

    @model_validator(mode="after")
    def _subnet_inside(self) -> NewNetwork:
        if not self.subnet_cidr.subnet_of(self.cidr):
            raise ValueError(f"subnetCidr {self.subnet_cidr} is not inside cidr {self.cidr}")
        return self


class ExistingNetwork(Strict):
    kind: Literal["existing"]
    vpc_id: Annotated[str, _aws_id("vpc")]
    subnet_id: Annotated[str, _aws_id("subnet")]


Network = Annotated[NewNetwork | ExistingNetwork, Field(discriminator="kind")]


class OnDemand(Strict):
    kind: Literal["on-demand"]


class Reservation(Strict):
    """An On-Demand Capacity Reservation (ODCR) the instances must land in."""

    kind: Literal["reservation"]
    reservation_id: Annotated[str, _aws_id("cr")]


class PurchasedBlock(Strict):
    """What `flashfleet capacity buy` recorded about the block it bought (the EC2 API's answer).

    ``pulumi up`` checks the live reservation, not this record; ``plan`` shows the window and the
    cost figures take the price from here, with its source.
    """

    offering_id: str = Field(min_length=1)
    availability_zone: str = Field(min_length=1)
    instance_count: StrictInt = Field(ge=1)
    start: AwareDatetime
    end: AwareDatetime
    upfront_price_usd: StrictFloat = Field(ge=0, allow_inf_nan=False)
    price_source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _window(self) -> PurchasedBlock:
        if self.end <= self.start:
            raise ValueError(f"end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        return self

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


class CapacityBlock(Strict):
    """A purchased Capacity Block for ML: market type capacity-block, no placement group."""

    kind: Literal["block"]
    reservation_id: Annotated[str, _aws_id("cr")]
    # `pulumi up` on a block that has not started yet: wait for its start instead of refusing.
    wait_for_start: StrictBool = False
    purchased: PurchasedBlock | None = None  # written by `flashfleet capacity buy`


Capacity = Annotated[OnDemand | Reservation | CapacityBlock, Field(discriminator="kind")]


class InstanceOverride(Strict):
    """Figures the catalog does not know (or that a stack knows better) for its instance type."""

    host_memory_gib: StrictInt | None = Field(default=None, ge=1, le=MAX_HOST_MEMORY_GIB)
    efa_network_cards: StrictInt | None = Field(default=None, ge=1, le=MAX_EFA_CARDS)
    price_usd_per_hour: StrictFloat | None = Field(default=None, gt=0, le=10000, allow_inf_nan=False)


class AwsSource(Strict):
    kind: Literal["aws"]
    # default: the catalog's type for the stack's hardware
    instance_type: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,32}\.[a-z0-9-]{1,32}$")
    instance: InstanceOverride = InstanceOverride()
    network: Network
    capacity: Capacity = OnDemand(kind="on-demand")
    # None = a cluster placement group unless the capacity is a block (blocks are co-located).
    placement_group: StrictBool | None = None
    # CIDRs that together cover the internet (0.0.0.0/0, two /1s, ::/0; see stack.ingress) open
    # SSH and the serving port to it: only with this explicit flag.
    # (Declared before allowedCidrs so that its validator sees it.)
    allow_public_ingress: StrictBool = False
    allowed_cidrs: tuple[Annotated[IPv4Network | IPv6Network, BeforeValidator(parse_cidr)], ...] = Field(
        min_length=1
    )
    public_ip: StrictBool = True  # an Elastic IP on node's primary interface (EFA nodes get none)
    ami: Annotated[str, _aws_id("ami")] | None = None  # default: the DLAMI SSM parameter
    dlami_os: Literal["ubuntu-22.04", "ubuntu-24.04"] = "ubuntu-24.04"
    # an existing EC2 key pair; SSM Session Manager works without
    key_name: Annotated[str, _safe(safe_values.key_name)] | None = None
    root_volume_gib: StrictInt | None = Field(default=None, ge=100, le=16384)

    @field_validator("allowed_cidrs")
    @classmethod
    def _public_cidr_flag(
        cls, value: tuple[IPv4Network | IPv6Network, ...], info: ValidationInfo
    ) -> tuple[IPv4Network | IPv6Network, ...]:
        require_public_opt_in(value, info.data.get("allow_public_ingress", False), "SSH and the serving port")
        return value

    @model_validator(mode="after")
    def _block_no_placement(self) -> AwsSource:
        if self.capacity.kind == "block" and self.placement_group:
            raise ValueError(
                "placementGroup: a Capacity Block is already co-located and does not take a "
                "cluster placement group; leave placementGroup unset"
            )
        return self

    @property
    def uses_placement_group(self) -> bool:
        return self.capacity.kind != "block" if self.placement_group is None else self.placement_group


# --- Existing hosts --------------------------------------------------------------------------------


class HostGpus(Strict):
    model: str = Field(pattern=r"^[a-z0-9]{1,32}$")  # hardware id: gb300 | h200 | mi355x
    count: StrictInt = Field(ge=1, le=MAX_GPUS)


class ExistingHost(Strict):
    # Reach ssh as its destination and the IMEX/Mooncake files as one line each: an IP literal
    # or a DNS name, never an option (`-oProxyCommand=...`) or a second line.
    address: Annotated[str, _safe(safe_values.host_address)]
    ssh_user: Annotated[str, _safe(safe_values.posix_user)]
    # Both required on a host that serves the model; the router's own host (cluster.router.host)
    # needs neither (planning.checks.node_facts says which host lacks them).
    gpus: HostGpus | None = None
    host_memory_gib: StrictInt | None = Field(default=None, ge=1, le=MAX_HOST_MEMORY_GIB)
    # Address the other nodes reach this one on (rendezvous, Mooncake); default: address.
    private_address: Annotated[str, _safe(safe_values.host_address)] | None = None
    # The host's SSH public keys: pinned (StrictHostKeyChecking=yes against a known_hosts file
    # of the run) before any secret is sent to it.
    host_keys: tuple[Annotated[str, _safe(safe_values.host_key)], ...] = Field(default=(), max_length=16)


class ExistingSource(Strict):
    kind: Literal["existing"]
    hosts: tuple[ExistingHost, ...] = Field(min_length=1)
    # Send the HF token to hosts without hostKeys anyway (whoever answers at their address).
    allow_unpinned_host_keys: StrictBool = False

    def ssh_addresses(self) -> list[str]:
        return [h.address for h in self.hosts]

    def private_addresses(self) -> list[str]:
        """Where the nodes reach each other: a host's private address, else the one SSH uses."""
        return [h.private_address or h.address for h in self.hosts]

    @model_validator(mode="after")
    def _unique(self) -> ExistingSource:
        seen = [h.address for h in self.hosts]  # canonical: `NODE.example.com.` is node.example.com
        dupes = sorted({a for a in seen if seen.count(a) > 1})
        if dupes:
            raise ValueError(f"hosts listed twice: {', '.join(dupes)}")
        return self


# --- Node sources ------------------------------------------------------------------------------------
# KubernetesSource (a GPU cluster the user already has) lives in flashfleet.stack.kubernetes_source.
NodeSource = Annotated[AwsSource | ExistingSource | KubernetesSource, Field(discriminator="kind")]


class Nodes(Strict):
    count: StrictInt = Field(ge=1, le=64)
    source: NodeSource

    @model_validator(mode="after")
    def _count_matches_hosts(self) -> Nodes:
        if isinstance(self.source, ExistingSource) and len(self.source.hosts) != self.count:
            raise ValueError(
                f"count is {self.count} but source.hosts lists {len(self.source.hosts)} machines"
            )
        return self


# --- Cluster: several instances behind one router ------------------------------------------


class RouterSpec(Strict):
    """The stack's endpoint: the router (SMG), beside the first instance's server on node 0, or
    on a node of its own: an existing host (``host``: the address of one of
    ``nodes.source.hosts``), or on AWS a small CPU instance (``instanceType``)."""

    # How the router picks a worker (smg launch --policy); cache_aware is its default.
    policy: Literal["cache_aware", "round_robin", "power_of_two"] = "cache_aware"
    # An existing host that runs the router and no worker; it counts in nodes.count.
    host: Annotated[str, _safe(safe_values.host_address)] | None = None
    # AWS: a CPU instance of the catalog (hardware "cpu") that runs the router and no worker,
    # launched beside the GPU nodes (the last node); it counts in nodes.count.
    instance_type: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,32}\.[a-z0-9-]{1,32}$")

    @model_validator(mode="after")
    def _one_place(self) -> RouterSpec:
        if self.host is not None and self.instance_type is not None:
            raise ValueError("host (an existing host) or instanceType (an AWS node), not both")
        return self

    @property
    def own_node(self) -> bool:
        """The router has a node of its own, with no worker on it."""
        return self.host is not None or self.instance_type is not None


class ClusterSpec(Strict):
    """The serving shape: replicas, or prefill and decode instances (pd), behind one router.

    Each instance has nodes of its own; ``nodes.count`` is instances x nodesPerInstance.
    """

    replicas: StrictInt | None = Field(default=None, ge=2, le=64)
    prefill: StrictInt | None = Field(default=None, ge=1, le=64)
    decode: StrictInt | None = Field(default=None, ge=1, le=64)
    nodes_per_instance: StrictInt = Field(default=1, ge=1, le=64)
    router: RouterSpec = RouterSpec()

    @model_validator(mode="after")
    def _one_shape(self) -> ClusterSpec:
        if self.replicas is not None and (self.prefill is not None or self.decode is not None):
            raise ValueError("set replicas, or prefill and decode (topology: pd), not both")
        if self.replicas is None and (self.prefill is None) != (self.decode is None):
            raise ValueError("prefill and decode go together: set both (at least 1 each)")
        if self.replicas is None and self.prefill is None:
            raise ValueError("set replicas (2 or more), or prefill and decode (topology: pd)")
        return self

    @property
    def instances(self) -> int:
        return self.replicas or (self.prefill or 0) + (self.decode or 0)

    def node_count(self) -> int:
        return self.instances * self.nodes_per_instance + self.router.own_node

    def shape_text(self) -> str:
        shape = (
            f"{self.replicas} replicas" if self.replicas else f"{self.prefill} prefill + {self.decode} decode"
        )
        router = ", plus the router's own node" if self.router.own_node else ""
        return f"{shape} x {self.nodes_per_instance} node(s) each{router}"


# --- Mooncake L3 tier ------------------------------------------------------------------------------


class Mooncake(Strict):
    """Where the Mooncake master runs and what each serving node gives the store."""

    master_node: StrictInt = Field(default=0, ge=0, lt=64)
    protocol: Literal["rdma", "efa", "tcp"]
    # host memory each node contributes to the store
    global_segment_gib: StrictInt = Field(ge=1, le=MAX_HOST_MEMORY_GIB)
    # RDMA devices to pin; empty = auto-discover
    devices: tuple[Annotated[str, _safe(safe_values.device_name)], ...] = Field(default=(), max_length=64)
    # Unprivileged ports only: a port below 1024 is a system service's (rpcPort: 22 is sshd's).
    rpc_port: StrictInt = Field(default=50051, ge=1024, le=65535)
    metadata_port: StrictInt = Field(default=8080, ge=1024, le=65535)
    metrics_port: StrictInt = Field(default=9003, ge=1024, le=65535)  # mooncake_master --metrics_port

    @field_validator("metadata_port")
    @classmethod
    def _distinct_ports(cls, value: int, info: ValidationInfo) -> int:
        if value == info.data.get("rpc_port"):
            raise ValueError(f"{value} is rpcPort too: each service needs its own port")
        return value

    # Runs only when metricsPort is written (pydantic skips defaults); a written rpcPort or
    # metadataPort that meets the default metrics port is planning's port-collision check's.
    @field_validator("metrics_port")
    @classmethod
    def _distinct_metrics_port(cls, value: int, info: ValidationInfo) -> int:
        for key, name in (("rpc_port", "rpcPort"), ("metadata_port", "metadataPort")):
            if value == info.data.get(key):
                raise ValueError(f"{value} is {name} too: each service needs its own port")
        return value


# --- Benchmark gate and teardown ------------------------------------------------------------------


class BenchSpec(Strict):
    # workload profile name -> its thresholds; `bench --threshold` overrides one for a run
    thresholds: dict[str, Thresholds] = Field(default_factory=dict)


class TeardownSpec(Strict):
    # The weight cache is hundreds of GB and slow to download again: kept unless set to false.
    keep_caches: StrictBool = True


# --- Bring-up model (flashfleet plan's critical path) ---------------------------------------------


class Bandwidth(Strict):
    """Gigabits per second one node gets from the Hub (weights) and the registry (image)."""

    weights_gbps: StrictFloat | None = Field(default=None, gt=0, le=3200)
    image_gbps: StrictFloat | None = Field(default=None, gt=0, le=3200)


class BringupSpec(Strict):
    """Overrides of the catalog's per-source defaults (flashfleet/catalog/bringup.toml)."""

    bandwidth: Bandwidth = Bandwidth()
    driver_install_s: StrictFloat | None = Field(default=None, ge=0, le=86400)


class WeightsSnapshotSpec(Strict):
    """The weights volume kept as an EBS snapshot between bring-ups (AWS)."""

    # Days the snapshot is kept after the last bring-up that used or made it: its
    # flashfleet:expires-at tag, by which `sweep` deletes it (a snapshot bills per GB-month).
    keep_days: StrictInt = Field(default=7, ge=1, le=90)
    # MiB/s at which a volume restored from the snapshot fetches its blocks from S3 (EC2's
    # Provisioned Rate for Volume Initialization, 100 to 300, billed); unset: lazy loading.
    initialization_rate_mibs: StrictInt | None = Field(default=None, ge=100, le=300)


class CachesSpec(Strict):
    """What the nodes keep between two boots of the server (docs/bringup-time.md)."""

    # true: the compile caches of SGLang's kernels (FlashInfer, DeepGEMM, Triton, TVM FFI,
    # TileLang, torch, CUDA's PTX cache) live on the node's cache volume, one folder per image
    # and GPU model, instead of inside the container that `down` removes; a restart or a second
    # bring-up on the same disk then skips the JIT builds. The command is the same: the badge
    # does not move.
    jit: StrictBool = True
    # AWS only: the weights volume outlives the stack as an EBS snapshot, keyed by the locked
    # commit of every repository it holds; the next `up` (this stack's or another's with the
    # same weights) restores it instead of downloading (docs/bringup-time.md).
    weights_snapshot: WeightsSnapshotSpec | None = None


class ServingSpec(Strict):
    """How clients reach the servers (docs/security.md, "API key")."""

    # required: every process that serves the OpenAI API demands `Authorization: Bearer <key>`;
    # the key is the Pulumi secret `flashfleet:apiKey` (or $FLASHFLEET_API_KEY for `configure`)
    # and reaches the server in a root-only `--config` file, never in its argv.
    api_key: Literal["required", "off"] = "off"


class WeightsSpec(Strict):
    # True: the checkpoint is already in model_cache_dir (a volume, a node-local cache): the
    # bring-up downloads nothing and the weights leave the critical path.
    prestaged: StrictBool = False


# Recipe options a stack sets through its cluster section, never in options.
SHAPE_KEYS = {
    "replicas": "cluster.replicas",
    "prefill": "cluster.prefill",
    "decode": "cluster.decode",
    "router_policy": "cluster.router.policy",
}

# --- The stack --------------------------------------------------------------------------------------


class StackSpec(Strict):
    description: Annotated[str, _safe(safe_values.plain_text)] = Field(min_length=1)
    hardware: str
    strategy: str
    topology: str = "unified"
    options: dict[str, OptionValue] = Field(default_factory=dict)
    ttl: Ttl
    image: ImageSpec
    nodes: Nodes
    mooncake: Mooncake | None = None
    cluster: ClusterSpec | None = None  # None: one instance (one server, or one multi-node server)
    # Created, chmodded, mounted read-write into every container and, with keepCaches: false,
    # deleted on teardown: only strictly below a root flashfleet may own (safe_values.host_path).
    model_cache_dir: HostPath = "/opt/flashfleet/hf-cache"
    bench: BenchSpec = BenchSpec()
    teardown: TeardownSpec | None = None  # None: keep the caches
    caches: CachesSpec = CachesSpec()
    bringup: BringupSpec = BringupSpec()
    weights: WeightsSpec = WeightsSpec()
    serving: ServingSpec = ServingSpec()
    site: Site = Site()  # mirrors, indexes and the like: what a stack may set for the roles
    # required: `plan`, `validate` and `up` refuse the stack unless <stack>.lock.yaml pins every
    # repository it downloads (flashfleet.stack.lock); optional: a stack without one still runs,
    # with a warning that it is not repeatable.
    lock: Literal["required", "optional"] = "optional"

    @field_validator("options")
    @classmethod
    def _nodes_not_an_option(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "nodes" in value:
            raise ValueError("nodes is set by nodes.count, not in options")
        for name, key in SHAPE_KEYS.items():
            if name in value:
                raise ValueError(f"{name} is set by {key}, not in options")
        return value

    @property
    def router_program(self) -> str | None:
        """What fronts the workers: smg, which the derived image installs, or the release image's
        own sglang_router (image.derived false, or options.router); None: no router."""
        if self.cluster is None and self.topology != "pd":
            return None
        chosen = self.options.get("router")
        if isinstance(chosen, str):
            return chosen
        return "smg" if self.image.derived else "sglang_router"

    @property
    def gpu_node_count(self) -> int:
        """The nodes that serve the model: nodes.count less a router's node of its own."""
        own = self.cluster is not None and self.cluster.router.own_node
        return self.nodes.count - own

    @property
    def keeps_caches(self) -> bool:
        """`down` keeps the weight and compile caches (teardown.keepCaches; kept when unset)."""
        return self.teardown is None or self.teardown.keep_caches
