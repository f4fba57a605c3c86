"""The ``kubernetes`` node source: serve the recipes on a GPU cluster the user already has.

Strict like the rest of the stack spec (unknown keys refused, frozen, camelCase keys). It names
where to deploy (kubeconfig context, namespace), where each hardware's GPU nodes are (node
selectors, tolerations, extra device-plugin resources), and where the model cache lives (a PVC of
a class and size, or a host path). Cross-field checks that need the recipe (a node pool for the
stack's hardware, a shared cache for several pods) are made by ``flashfleet.k8s`` when rendering.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Network, IPv6Network
from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flashfleet.catalog import download_client, hardware_catalog
from flashfleet.stack import safe_values
from flashfleet.stack.ingress import parse_cidr, require_public_opt_in
from flashfleet.stack.strict import Strict

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Object names (storage classes, device classes): a DNS subdomain of at most 253 characters.
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A label key: optional DNS-subdomain prefix, then a name of up to 63 characters.
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# Storage sizes in binary units only: "800Gi", "2Ti".
_SIZE = re.compile(r"^[1-9][0-9]*(Gi|Ti)$")
# A tag that pins an image on its own names a whole release, major.minor.patch (3.12.12-slim,
# 3.10.1): a tag of fewer parts (python:3, python:3.12) or a word (slim, stable, edge) moves
# to each new release; anything else needs a digest.
_RELEASE_TAG = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+([-_.][A-Za-z0-9_.-]*)?$")
RELEASE_PIN_RULE = "a release tag major.minor.patch (python:3.12.12-slim-bookworm), @sha256:<64 hex>, or both"


def release_pinned_image(value: str) -> str:
    """An image a cluster pulls by itself: a digest, or a tag that names one release."""
    value = safe_values.pinned_image(value)
    name, _, digest = value.partition("@")
    tag = name.rpartition(":")[2] if name.rfind(":") > name.rfind("/") else ""
    if not digest and not _RELEASE_TAG.fullmatch(tag):
        raise ValueError(f"{value!r} floats: tag {tag!r} moves to new releases; use {RELEASE_PIN_RULE}")
    return value


def _check_label_key(key: str) -> str:
    if not _LABEL_KEY.fullmatch(key) or len(key) > 316:
        raise ValueError(f"{key!r} is not a Kubernetes label key")
    return key


class Toleration(Strict):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: StrictInt | None = Field(default=None, ge=0)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else _check_label_key(value)

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        if value is not None and not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f"{value!r} is not a Kubernetes label value")
        return value

    @model_validator(mode="after")
    def _operator_value(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator Equal needs a key")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds applies to the NoExecute effect only")
        return self

    def manifest(self) -> dict[str, object]:
        out: dict[str, object] = {"operator": self.operator}
        for field, key in (
            ("key", "key"),
            ("value", "value"),
            ("effect", "effect"),
            ("toleration_seconds", "tolerationSeconds"),
        ):
            if (value := getattr(self, field)) is not None:
                out[key] = value
        return out


class ServerResources(Strict):
    """What one server pod may use of its node besides the GPUs: the node's allocatable CPU and
    memory less what its daemons need. Not known offline (the cluster's node shape is the
    user's), so the stack says it; it is both request and limit of the pod's GPU containers."""

    cpu: StrictInt = Field(ge=1, le=4096, description="cores")
    # Covers /dev/shm (a memory emptyDir counts against it) and the HiCache host tier.
    memory_gib: StrictInt = Field(ge=1, le=65536)


class NodePool(Strict):
    """Where one hardware's GPU nodes are, and what else their pods may ask the device plugins for."""

    server_resources: ServerResources
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    # Device-plugin resources for RDMA (the Mooncake L3 tier over rdma/efa), e.g.
    # {"vpc.amazonaws.com/efa": 16} on EKS or {"rdma/rdma_shared_device_a": 1}.
    rdma_resources: dict[str, Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=dict)
    # Dynamic Resource Allocation device class for GPUs (e.g. "gpu.nvidia.com"): needed only when
    # two processes of one pod share GPUs (encoder disaggregation), which device-plugin limits
    # cannot express: each container's limit gets GPUs of its own.
    gpu_device_class: str | None = Field(default=None, max_length=253, pattern=_DNS_SUBDOMAIN)
    # The GPUs each node of the pool offers its pods (its allocatable nvidia.com/gpu or
    # amd.com/gpu, or the devices its DRA driver publishes): fewer than the hardware's own count
    # where the cluster keeps some back or partitions them. Unset: the hardware's GPUs per node.
    gpus_per_node: StrictInt | None = Field(default=None, ge=1, le=64)

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            _check_label_key(key)
            if not _LABEL_VALUE.fullmatch(label):
                raise ValueError(f"{label!r} (for {key}) is not a Kubernetes label value")
        return value

    @field_validator("rdma_resources")
    @classmethod
    def _resources(cls, value: dict[str, int]) -> dict[str, int]:
        for name, count in value.items():
            domain = name.partition("/")[0]
            if "/" not in name:
                raise ValueError(f"{name!r}: extended resources are named domain/name")
            # the API server's extended-resource rule: no requests. prefix (that names a quota);
            # kubernetes.io names native resources, which no device plugin registers
            if name.startswith("requests.") or domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
                raise ValueError(
                    f"{name!r} is not an extended resource name: its domain may not be kubernetes.io, "
                    "and it may not start with requests."
                )
            _check_label_key(name)
            if count < 1:
                raise ValueError(f"{name}: count must be at least 1")
        return value


class PvcCache(Strict):
    """A PersistentVolumeClaim the stack creates for the Hugging Face cache."""

    kind: Literal["pvc"]
    storage_class: str = Field(max_length=253, pattern=_DNS_SUBDOMAIN)
    size: str = Field(description="e.g. 1500Gi: room for the checkpoint (and the DFlash2 draft)")
    # ReadWriteMany lets one download Job fill the cache for every server pod; ReadWriteOnce
    # serves one pod only, which then downloads in an init container.
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = "ReadWriteMany"

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _SIZE.fullmatch(value):
            raise ValueError("must be a whole number of Gi or Ti, such as 1500Gi or 2Ti")
        return value


class HostPathCache(Strict):
    """A directory on every GPU node (local NVMe); each server pod fills its own node's copy."""

    kind: Literal["hostPath"]
    path: str

    @field_validator("path")
    @classmethod
    def _safe(cls, value: str) -> str:
        # Mounted read-write into every server pod: `hostPath: /etc` would hand them the node's /etc.
        return safe_values.host_path(value)


ModelCache = Annotated[PvcCache | HostPathCache, Field(discriminator="kind")]


class KubernetesSource(Strict):
    kind: Literal["kubernetes"]
    # kubeconfig context for the stack's provider; None: the default provider (ambient kubeconfig).
    context: str | None = Field(default=None, min_length=1, max_length=253, pattern=r"^[^\x00-\x1f\x7f]+$")
    namespace: str = Field(min_length=1, max_length=63)
    create_namespace: StrictBool = True  # `true` or `false` only, never "yes" or 1
    # Keyed by hardware id (gb300, h200, mi355x); the stack's hardware must have an entry.
    node_pools: dict[str, NodePool] = Field(min_length=1)
    model_cache: ModelCache
    # The LeaderWorkerSet CRD (sigs.k8s.io lws) is installed: multi-node tensor parallel runs as
    # one LeaderWorkerSet; without it, as one StatefulSet per rank behind a headless Service.
    leader_worker_set: StrictBool = False
    # The cluster runs Kubernetes v1.36's Workload API with gang scheduling (alpha: the
    # GenericWorkload and GangScheduling gates, scheduling.k8s.io/v1alpha2 served): each
    # LeaderWorkerSet's pods join a PodGroup whose gang wants every rank, so the scheduler binds
    # none of a group until all of it fits (no half-placed group holding GPUs).
    gang_scheduling: StrictBool = False
    service_type: Literal["ClusterIP", "LoadBalancer"] = "ClusterIP"
    # The endpoint takes no API key on Kubernetes: a LoadBalancer admits only these client
    # networks (the Service's loadBalancerSourceRanges), judged like the AWS source's
    # allowedCidrs (stack.ingress); ranges that cover the internet need allowPublicIngress.
    # (Both declared after serviceType, allowPublicIngress before the ranges: their validator sees them.)
    allow_public_ingress: StrictBool = False
    load_balancer_source_ranges: tuple[
        Annotated[IPv4Network | IPv6Network, BeforeValidator(parse_cidr)], ...
    ] = ()
    # The weights download runs on an image of its own, not the serving image, so it starts
    # while the nodes still pull the serving image (flashfleet/catalog/downloads.toml pins both
    # defaults; a cluster behind a mirror names its copies here).
    download_image: str = Field(default_factory=lambda: download_client().download_image)
    pause_image: str = Field(default_factory=lambda: download_client().pause_image)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.fullmatch(value):
            raise ValueError("must be a DNS label: lowercase letters, digits and '-'")
        return value

    @model_validator(mode="before")
    @classmethod
    def _ranges_checked(cls, data: object) -> object:
        # Left out, the ranges are still judged (a LoadBalancer needs them), under their own key.
        if isinstance(data, dict) and "loadBalancerSourceRanges" not in data:
            return {**data, "loadBalancerSourceRanges": ()}
        return data

    @field_validator("load_balancer_source_ranges")
    @classmethod
    def _source_ranges(
        cls, value: tuple[IPv4Network | IPv6Network, ...], info: ValidationInfo
    ) -> tuple[IPv4Network | IPv6Network, ...]:
        load_balancer = info.data.get("service_type") == "LoadBalancer"
        if not load_balancer:
            if value:
                raise ValueError("only a serviceType: LoadBalancer takes source ranges")
            return value
        if not value:
            raise ValueError(
                "serviceType LoadBalancer needs the client networks it admits (CIDRs such as "
                "203.0.113.0/24): the endpoint has no API key on Kubernetes"
            )
        require_public_opt_in(
            value, info.data.get("allow_public_ingress", False), "the unauthenticated endpoint"
        )
        return value

    @field_validator("download_image", "pause_image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        return release_pinned_image(value)

    @field_validator("node_pools")
    @classmethod
    def _known_hardware(cls, value: dict[str, NodePool]) -> dict[str, NodePool]:
        known = hardware_catalog()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown hardware {', '.join(unknown)} (choose from: {', '.join(known)})")
        return value
