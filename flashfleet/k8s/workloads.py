"""Pods and workloads from container launches: one pod per recipe node.

Inside a pod the recipe's ``start_after`` order is kept by the kubelet: a process that others
start after runs as a native sidecar (an init container with ``restartPolicy: Always``) whose
startup probe on ``/health`` must pass before the next container starts. So the encoder is
serving before the language server starts, and prefill and decode before the PD router, without
a wrapper script around any argv. The processes of one recipe node share a pod because their
argv address each other on localhost (``--encoder-urls http://localhost:30001``, the router's
``http://127.0.0.1:31000``) and PD's NIXL runs over loopback UCX.

Multi-node tensor parallel: a LeaderWorkerSet (leader = rank 0, workers = ranks 1..n-1, the group
recreated as a whole when one pod fails), or, without the CRD, one StatefulSet per rank behind a
headless Service. Ranks other than 0 serve no HTTP (SGLang starts only schedulers there), so
only rank 0 has probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flashfleet.k8s import names
from flashfleet.k8s.containers import SHM_VOLUME, PodResources, container, shm_size_limit
from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.launch import ContainerLaunch

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_WORKER_INDEX = "LWS_WORKER_INDEX"  # set by the LeaderWorkerSet controller: 0 leader, 1.. workers
NODE_RANK = "--node-rank"


@dataclass(frozen=True)
class PodShape:
    """What every pod of the stack has besides its containers."""

    placement: dict[str, Any]  # nodeSelector, tolerations
    volumes: list[dict[str, Any]]  # model cache and Mooncake config
    init_downloads: list[dict[str, Any]]  # per-pod weight download, before the model processes
    gpu_claim_template: str | None  # DRA ResourceClaimTemplate when a pod's processes share GPUs


def shares_gpus(launches: Sequence[ContainerLaunch]) -> bool:
    seen: set[int] = set()
    for launch in launches:
        if seen & set(launch.gpus):
            return True
        seen |= set(launch.gpus)
    return False


def pod_spec(
    launches: Sequence[ContainerLaunch],
    res: PodResources,
    shape: PodShape,
    *,
    http: bool = True,
    commands: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The pod of one recipe node; ``launches`` in start order."""
    in_pod = {launch.name for launch in launches}
    waited_on: set[str] = set()
    for launch in launches:
        outside = set(launch.start_after) - in_pod
        if outside:
            raise KubernetesRenderError(
                "topology", f"{launch.name} starts after {sorted(outside)}, which run in another pod"
            )
        waited_on |= set(launch.start_after)
    commands = commands or {}
    sidecars, mains = [], []
    pod_gpus = sum(len(launch.gpus) for launch in launches)
    for launch in launches:
        made = container(launch, res, serves_http=http, pod_gpus=pod_gpus, command=commands.get(launch.name))
        if launch.name in waited_on:
            sidecars.append({**made, "restartPolicy": "Always"})
        else:
            mains.append(made)
    shm = max((_gib(shm_size_limit(launch.shm_size)) for launch in launches), default=0)
    volumes = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm}Gi"}}]
    volumes += shape.volumes
    spec: dict[str, Any] = {
        "containers": mains,
        "volumes": volumes,
        # Nothing in the pod talks to the Kubernetes API: no service-account token to steal.
        "automountServiceAccountToken": False,
        # SGLang exits on SIGTERM quickly; no need to hold GPUs for the default 30 s more.
        "terminationGracePeriodSeconds": 30,
        **shape.placement,
    }
    if shape.init_downloads or sidecars:
        spec["initContainers"] = [*shape.init_downloads, *sidecars]
    if res.gpu_claim is not None:
        spec["resourceClaims"] = [
            {"name": res.gpu_claim, "resourceClaimTemplateName": shape.gpu_claim_template}
        ]
    return spec


def _gib(quantity: str) -> int:
    number, unit = int(quantity[:-2]), quantity[-2:]
    return {"Gi": number, "Mi": -(-number // 1024), "Ki": 1}[unit]


def _template(pod_labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": pod_labels}, "spec": spec}


def deployment(
    name: str,
    namespace: str,
    stack: str,
    pod: str,
    spec: dict[str, Any],
    *,
    endpoint: bool,
    component: str = "serve",
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    lbl = names.labels(stack, component, **(extra_labels or {}))
    pod_labels = {**lbl, **names.selector(stack, pod)}
    if endpoint:
        pod_labels[names.LABEL_ENDPOINT] = "true"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": names.metadata(name, namespace, lbl),
        "spec": {
            "replicas": 1,
            # The GPUs are all taken: a rolling update would wait forever for a second set.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": names.selector(stack, pod)},
            "template": _template(pod_labels, spec),
        },
    }


def worker_command(leader: ContainerLaunch, workers: Sequence[ContainerLaunch]) -> list[str]:
    """The workers' shared argv: rank 1's, with the rank replaced by the LWS worker index.

    Every worker's argv must equal this one once Kubernetes expands ``$(LWS_WORKER_INDEX)``.
    """
    template = list(workers[0].argv)
    at = template.index(NODE_RANK) + 1
    template[at] = f"$({LWS_WORKER_INDEX})"
    for worker in workers:
        # The rank within its instance: a cluster's instance 1 starts past instance 0's nodes.
        expected = [w if w != f"$({LWS_WORKER_INDEX})" else str(worker.rank) for w in template]
        if list(worker.argv) != expected or worker.argv[at] != str(worker.rank):
            raise KubernetesRenderError(
                "topology", f"{worker.name}: workers differ by more than {NODE_RANK}; no shared template"
            )
    return template


def leader_worker_set(
    name: str,
    namespace: str,
    *,
    stack: str,
    ranks: Sequence[ContainerLaunch],
    res: PodResources,
    shape: PodShape,
    pod: str = "serve",
    endpoint: bool = True,
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``pod``: the pods' label prefix (``<pod>-rank-0``, ``<pod>-worker``); ``endpoint``: the
    leader is behind the stack's endpoint Service (not a cluster instance's: the router is)."""
    lbl = names.labels(stack, "serve", **(extra_labels or {}))
    leader, workers = ranks[0], list(ranks[1:])
    command = worker_command(leader, workers)
    leader_labels = {**lbl, **names.selector(stack, f"{pod}-rank-0")}
    if endpoint:
        leader_labels[names.LABEL_ENDPOINT] = "true"
    worker_labels = {**lbl, **names.selector(stack, f"{pod}-worker")}
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": names.metadata(name, namespace, lbl),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": len(ranks),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _template(leader_labels, pod_spec([leader], res, shape)),
                "workerTemplate": _template(
                    worker_labels,
                    pod_spec([workers[0]], res, shape, http=False, commands={workers[0].name: command}),
                ),
            },
        },
    }


def rank_stateful_sets(
    stack: str,
    namespace: str,
    ranks: Sequence[ContainerLaunch],
    res: PodResources,
    shape: PodShape,
) -> list[dict[str, Any]]:
    """One StatefulSet per rank (stable pod name, literal argv) and their headless Service."""
    lbl = names.labels(stack, "serve")
    headless = names.serve_name(stack)
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": names.metadata(headless, namespace, lbl),
            "spec": {
                "clusterIP": "None",
                # Ranks rendezvous before any of them is ready.
                "publishNotReadyAddresses": True,
                "selector": {names.LABEL_INSTANCE: stack, names.LABEL_COMPONENT: "serve"},
            },
        }
    ]
    for launch in ranks:
        pod = f"serve-rank-{launch.node}"
        pod_labels = {**lbl, **names.selector(stack, pod)}
        if launch.node == 0:
            pod_labels[names.LABEL_ENDPOINT] = "true"
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": names.metadata(names.rank_name(stack, launch.node), namespace, lbl),
                "spec": {
                    "replicas": 1,
                    "serviceName": headless,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": names.selector(stack, pod)},
                    "template": _template(pod_labels, pod_spec([launch], res, shape, http=launch.node == 0)),
                },
            }
        )
    return out


def leader_address(lws: str, namespace: str) -> str:
    """The stable DNS name of a LeaderWorkerSet's leader pod (group 0)."""
    return f"{lws}-0.{lws}.{namespace}"  # the LWS controller names its headless Service after the set


def rank_addresses(stack: str, namespace: str, nodes: int, *, leader_worker_set: bool) -> list[str]:
    """Stable DNS names of the ranks' pods, rank 0 first (the ``--dist-init-addr`` host)."""
    if leader_worker_set:
        lws = names.serve_name(stack)
        return [leader_address(lws, namespace)] + [f"{lws}-0-{r}.{lws}.{namespace}" for r in range(1, nodes)]
    headless = names.serve_name(stack)
    return [f"{names.rank_name(stack, r)}-0.{headless}.{namespace}" for r in range(nodes)]
