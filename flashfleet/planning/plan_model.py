"""The shape of `flashfleet plan`: one typed model that the text view reads and `--format json`
dumps (``model_dump(mode="json")``), so the two cannot drift apart.

Field order is the JSON's key order. Numbers that may arrive as int or float keep the type they
came with (``Number``), so the JSON prints them as the catalog and stack file wrote them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flashfleet.launch import ContainerLaunch
from flashfleet.stack.image import ImageSpec
from flashfleet.stack.image_packages import ImagePackages
from flashfleet.stack.mooncake_endpoints import MooncakeEndpoints

Number = int | float


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ingress(_View):
    cidrs: list[str]
    ports: list[int]
    within_group: str


class RouterNodeView(_View):
    """A cluster router's CPU instance of its own (cluster.router.instanceType), the last node."""

    node: int
    instance_type: str
    arch: str
    ami: str
    root_volume_gib: int
    price_usd_per_hour: float | None
    price_source: str | None


class AwsSourceView(_View):
    kind: Literal["aws"] = "aws"
    region: str | None
    instance_type: str | None
    arch: str | None
    efa_network_cards: int | None
    host_memory_gib: int | None
    capacity: dict[str, Any]  # the spec's capacity section, as the stack file spells it
    placement_group: str | None
    network: dict[str, Any]  # the spec's network section, as the stack file spells it
    ingress: Ingress
    public_ip: bool
    ami: str
    root_volume_gib: int | None
    imdsv2: str
    ttl_guard: str
    gpu_nodes: int
    router_node: RouterNodeView | None = None


class ExistingSourceView(_View):
    kind: Literal["existing"] = "existing"
    hosts: list[str]


class WorkloadContainer(_View):
    pod: str  # "pod", or a LeaderWorkerSet's "leader" / "worker"
    name: str
    stage: Literal["init", "sidecar", "main"]
    image: str
    command: list[str]
    env: dict[str, str]
    env_from: list[str]  # variables set by reference (Secret, pod IP)
    resources: dict[str, Any]


class Workload(_View):
    kind: str
    name: str
    serves: bool
    routes: bool  # a cluster's router, behind the endpoint Service
    containers: list[WorkloadContainer]


class KubernetesSourceView(_View):
    kind: Literal["kubernetes"] = "kubernetes"
    context: str | None  # None: the kubeconfig's current context
    namespace: str
    create_namespace: bool
    node_pool: dict[str, Any]
    model_cache: dict[str, Any]
    leader_worker_set: bool
    service_type: str
    load_balancer_source_ranges: list[str]
    secret: str | None
    objects: list[str]
    workloads: list[Workload]


SourceView = Annotated[AwsSourceView | ExistingSourceView | KubernetesSourceView, Field(discriminator="kind")]


class CapacityWindow(_View):
    availability_zone: str
    instance_count: int
    start: str
    end: str
    nodes_until: str
    upfront_price_usd: Number


class CapacityView(_View):
    kind: Literal["block", "reservation"]
    reservation_id: str
    needs_purchase: bool
    wait_for_start: bool
    window: CapacityWindow | None  # a bought block's window; None: not recorded in the stack


class PodProcess(_View):
    """A process as its container sees it on Kubernetes (no docker flags, no host paths)."""

    name: str
    role: str
    node: int
    image: str
    argv: list[str]
    env: dict[str, str]
    secret_env_names: list[str]
    gpus: list[int]
    port: int
    start_after: list[str]


class NodeView(_View):
    index: int
    name: str
    role: str
    address: str | None
    ssh_user: str
    instance_type: str | None
    gpu_count: int
    host_memory_gb: int | None
    host_memory_gib: int | None  # as given (stack file, instance sheet); GB above is derived
    hicache_host_gb: int
    mooncake_master: bool
    processes: list[ContainerLaunch | PodProcess]


class RouterView(_View):
    node: int
    address: str
    port: int


class RouterSettingView(_View):
    """One router setting as `plan` shows it: the flag and value, SMG's default, why, the source."""

    flag: str
    smg_default: str
    why: str
    source: str


class RouterProgramView(_View):
    """What fronts the workers (smg or the release image's sglang_router) and its settings."""

    program: str
    command: str  # smg launch | python -m sglang_router.launch_router
    why: str
    settings: list[RouterSettingView]


class InstanceView(_View):
    name: str
    role: str
    nodes: list[int]
    addresses: list[str | None]
    url: str | None


class ClusterView(_View):
    shape: str
    policy: str
    router: RouterView
    instances: list[InstanceView]
    request_path: str


class KubernetesMooncake(_View):
    master_node: None = None  # its own Deployment and Service
    master_server_address: str
    metadata_server: str
    protocol: str
    global_segment_gib: int
    devices: list[str]


class PhaseView(_View):
    name: str
    size_gb: Number | None
    basis: str | None
    gbps: Number | None
    seconds: Number | None
    start_s: Number | None
    end_s: Number | None
    overlaps: list[str]
    source: str


class CriticalPath(_View):
    node_source: str
    nodes: int
    phases: list[PhaseView]
    total_s: Number | None
    lanes: list[list[str]]
    largest_transfer: str | None
    ratio_to_largest_transfer: Number | None
    unknown: list[str]
    weights_prestaged: bool
    defaults_source: str
    # what the stack asks of the Hub: GB in all (None: a size unknown), how many nodes ask, why
    hub_gb: Number | None = None
    hub_downloads: int = 0
    hub_source: str = ""


class StartupPhase(_View):
    """One phase of the time to the first token, in the first bring-up and in the second (the same
    stack brought up again after `flashfleet down`)."""

    name: str
    first_s: Number | None  # None: unknown
    second_s: Number | None
    basis: str | None  # published | estimate | assumed; None when unknown
    source: str
    second_source: str  # why the second bring-up takes what it takes


class BringupTime(_View):
    total_s: Number | None  # None while any phase is unknown
    known_s: Number  # the phases known, on their schedule: a lower bound when some are unknown
    unknown: list[str]
    dominant: str | None  # the known phase that takes longest


class Lever(_View):
    """A stack or recipe setting that changes the time, with both bring-ups had it the other value."""

    name: str
    where: str  # recipe option | stack file
    setting: str  # as the stack has it
    other: str  # the value the figures below assume
    badge: str  # what the other value does to the badge
    first: BringupTime
    second: BringupTime


class MeasuredStartup(_View):
    """A bring-up of this stack recorded here: its servers' own startup timings (the slowest
    server's each), which replace the model's load, capture and readiness."""

    run: str  # the run directory's name
    servers: int
    load_s: Number
    jit_s: Number  # init, JIT builds and autotune: a cold or a warm kernel cache, not known which
    capture_s: Number
    ready_s: Number | None


class KernelCacheChannel(_View):
    """One way a node's kernel caches can reach a bring-up, and whether this stack has it."""

    name: str  # kept cache volume | weights snapshot | peer fan-out
    applies: bool
    detail: str


class KernelCaches(_View):
    """The kernel caches' key as the stack has it, and whether each bring-up starts warm on every
    GPU node (flashfleet.planning.kernel_cache)."""

    image: str  # what compiles the kernels: the image the units run (by digest where locked)
    image_pinned: bool
    gpu: str  # the hardware catalog's GPU model
    kernel_word_sets: int  # distinct sets of kernel-changing server words (PD: prefill, decode)
    nodes: int
    first: Literal["warm", "cold", "unknown"]
    first_source: str
    second: Literal["warm", "cold", "unknown"]
    second_source: str
    channels: list[KernelCacheChannel]
    unknown: list[str]


class TimeToFirstToken(_View):
    node_source: str
    phases: list[StartupPhase]
    first: BringupTime
    second: BringupTime
    levers: list[Lever]
    measured: MeasuredStartup | None = None
    kernels: KernelCaches | None = None


class LockedPart(_View):
    kind: Literal["weights", "image", "packages", "node-image"]
    name: str  # the repository, the image reference, or which packages
    state: Literal["locked", "floating"]
    pinned: str | None  # the commit or digest it is locked to
    detail: str


class LockView(_View):
    """What makes the stack's bring-up repeatable, part by part (flashfleet.stack.lock)."""

    file: str  # <stack>.lock.yaml, beside the stack file
    present: bool
    required: bool  # the stack's `lock: required`
    digest: str | None  # the lock's hash, as a benchmark's fingerprint carries it
    locked_on: str | None
    parts: list[LockedPart]


class UpdateView(_View):
    """How a change reaches the servers, and the outage it costs."""

    how: Literal["rolling", "pd-cut", "in-place"]
    outage: bool
    restart_s: float | None  # a server's restart, when every phase of it is known
    restart_known_s: float  # the phases known: a lower bound when some are unknown
    unknown: list[str]  # the restart's phases without a figure
    basis: str  # where the figures come from
    kubernetes: bool = False  # the Pulumi program cuts a PD group by renaming its workloads

    def seconds_text(self) -> str:
        if self.restart_s is not None:
            return f"about {self.restart_s:g} s"
        return f"at least {self.restart_known_s:g} s, with no figure for {', '.join(self.unknown)}"

    def text(self) -> str:
        if self.how == "rolling":
            return (
                "a changed server restarts one instance at a time (out of the router, back once ready): "
                "the endpoint keeps serving"
            )
        if self.how == "pd-cut" and self.kubernetes:
            return (
                "a changed server cuts the whole PD group: every prefill's and decode's workload is "
                "named after the group's version, so `up` replaces each one (the old deleted before "
                "the new is created) and updates the router to name the new ones only; no router "
                "reaches a prefill and a decode of different versions; the endpoint is down until the "
                f"new group is ready: {self.seconds_text()} ({self.basis})"
            )
        if self.how == "pd-cut":
            return (
                "a changed server cuts the whole PD group: every prefill and decode stops, then all start "
                "again, so no request meets a prefill and a decode of different versions; the endpoint is "
                f"down for a server's restart once the running requests finish: {self.seconds_text()} "
                f"({self.basis})"
            )
        return (
            "a changed server restarts in place: one instance, so the endpoint is down until it is ready "
            f"again: {self.seconds_text()} ({self.basis})"
        )


class PlanView(_View):
    stack: str
    description: str
    hardware: str
    strategy: str
    topology: str
    badge: str
    badge_source: str
    # the cookbook's own badge for the hardware, strategy and topology (None: it gives none); the
    # badge above differs where this stack's options or shape lowered it, or a measured variant set it
    cookbook_badge: str | None
    badge_origin: str  # whose the badge is: the cookbook's, or lowered by flashfleet and why
    model: str
    image: ImageSpec
    # what the serving image holds of the multimodal packages: from the release, or added by the
    # derived image, and why (flashfleet.stack.image_packages)
    image_packages: ImagePackages
    ttl: str
    capacity: CapacityView | None
    source: SourceView
    nodes: list[NodeView]
    cluster: ClusterView | None
    router: RouterProgramView | None = None
    start_order: list[str]
    mooncake: MooncakeEndpoints | KubernetesMooncake | None
    endpoint: str
    hourly_cost_usd: Number | None
    price_source: str | None
    # where the whole is unknown: the priced nodes' part (None: none is priced) and what has no price
    priced_part_usd: Number | None
    unpriced: list[str]
    critical_path: CriticalPath
    time_to_first_token: TimeToFirstToken
    # what a change of options, image or weights does to the endpoint; None on Kubernetes
    update: UpdateView | None
    lock: LockView
    # this stack's own badge, from its latest benchmark evidence (flashfleet.bench.evidence):
    # "measured here: ...", "evidence stale: ...", "no evidence"; None: not looked up
    evidence: str | None = None
    warnings: list[str]
    notes: list[str]

    def cost_text(self) -> str:
        """The hourly cost with its source; unknown, the priced part and each node kind without a
        price. `plan` and `up` both say it this way, so they never disagree."""
        cost = self.hourly_cost_usd
        if cost is not None:
            return f"${cost:.2f}/h" + (f" ({self.price_source})" if self.price_source else "")
        if not self.unpriced:
            return "unknown (no price in the catalog)"
        part = "" if self.priced_part_usd is None else f"; the priced nodes ${self.priced_part_usd:.2f}/h"
        return f"unknown: {'; '.join(self.unpriced)}{part}"
