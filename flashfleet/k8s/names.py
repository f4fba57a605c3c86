"""Object names and labels of a stack's Kubernetes objects, in one place."""

from __future__ import annotations

import re

from flashfleet.k8s.errors import KubernetesRenderError

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_POD = "flashfleet.dev/pod"  # which pod of the stack (serve, serve-rank-1, ...)
LABEL_ENDPOINT = "flashfleet.dev/endpoint"  # the pod behind the stack's endpoint Service
LABEL_CLUSTER_INSTANCE = "flashfleet.dev/cluster-instance"  # replica-0, prefill-1, router: a cluster's
# A PD group's version: a hash of what its prefills and decodes must share (image, argv, env).
# Every instance workload of the group and the router's pod carry it; see replicas.pd_version.
LABEL_PD_VERSION = "flashfleet.dev/pd-version"
# The LWS controller names a group's worker StatefulSet <set>-0, and the StatefulSet labels each
# pod with that name plus a 10-character revision hash: a label value of at most 63.
MAX_LWS_NAME = 50

# StatefulSet pods are named <statefulset>-<ordinal> and the StatefulSet adds a revision label of
# its own name plus a hash, so the longest name here (<stack>-serve-rank-NN) must stay within 52.
MAX_STACK_NAME = 36
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_stack_name(name: str) -> str:
    if len(name) > MAX_STACK_NAME or not _DNS_LABEL.fullmatch(name):
        raise KubernetesRenderError(
            "stack",
            f"{name!r} must be a DNS label of at most {MAX_STACK_NAME} characters "
            "(it prefixes every Kubernetes object name)",
        )
    return name


def shared_labels() -> dict[str, str]:
    """The labels of an object that several stacks may share (their namespace)."""
    return {LABEL_NAME: "flashfleet", LABEL_MANAGED_BY: "flashfleet"}


def labels(stack: str, component: str, **extra: str) -> dict[str, str]:
    return {
        LABEL_NAME: "flashfleet",
        LABEL_INSTANCE: stack,
        LABEL_COMPONENT: component,
        LABEL_MANAGED_BY: "flashfleet",
        **extra,
    }


def selector(stack: str, pod: str) -> dict[str, str]:
    return {LABEL_INSTANCE: stack, LABEL_POD: pod}


def metadata(name: str, namespace: str, object_labels: dict[str, str]) -> dict[str, object]:
    return {"name": name, "namespace": namespace, "labels": dict(object_labels)}


def serve_name(stack: str) -> str:
    """The model-serving workload (Deployment, LeaderWorkerSet, or headless Service of ranks)."""
    return f"{stack}-serve"


def rank_name(stack: str, rank: int) -> str:
    """One rank's StatefulSet when the LeaderWorkerSet CRD is absent."""
    return f"{stack}-serve-rank-{rank}"


def instance_name(stack: str, instance: str, version: str | None = None) -> str:
    """A cluster instance's workload (Deployment or LeaderWorkerSet) and, for one node, its Service;
    a PD instance's name ends in its group's version, so an update makes workloads of new names."""
    return f"{stack}-{instance}-{version}" if version else f"{stack}-{instance}"


def unversioned(name: str, version: str | None) -> str:
    """The name without its PD version: what the Pulumi program keys the object by, so that a
    new version replaces the old object (deleted first) instead of making one beside it."""
    return name.removesuffix(f"-{version}") if version else name


def router_name(stack: str) -> str:
    """A cluster's router Deployment (the endpoint Service selects its pod)."""
    return f"{stack}-router"


def endpoint_service(stack: str) -> str:
    return stack


def secret_name(stack: str) -> str:
    return f"{stack}-hf-token"


def weights_job(stack: str) -> str:
    return f"{stack}-weights"


def pre_pull(stack: str) -> str:
    """The DaemonSet that pulls the serving image on the serving nodes during the download."""
    return f"{stack}-prepull"


def model_cache_claim(stack: str) -> str:
    return f"{stack}-model-cache"


def gpu_claim_template(stack: str) -> str:
    return f"{stack}-gpus"


def mooncake_master(stack: str) -> str:
    return f"{stack}-mooncake"


def weights_program(stack: str) -> str:
    return f"{stack}-weights-fetch"


def mooncake_config(stack: str) -> str:
    return f"{stack}-mooncake-config"
