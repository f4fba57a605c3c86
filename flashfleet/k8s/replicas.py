"""A cluster (replicas, or prefill and decode instances) on Kubernetes: one workload per instance
and the SGLang router as a Deployment of its own, behind the stack's endpoint Service.

The router lists every instance by URL, so each instance's rank 0 needs a stable DNS name before
the recipe is rendered: a one-node instance's headless Service (beside its Deployment, both named
after the instance), or a multi-node instance's LeaderWorkerSet leader (the name the controller's
headless Service gives it). Every node of an instance gets that one address: the recipe uses it for
the router's URL and the instance's ``--dist-init-addr``, and an LWS worker template may differ
from each rank's argv by nothing but the rank.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from flashfleet.k8s import names
from flashfleet.k8s.containers import PodResources, port_name
from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.k8s.workloads import PodShape, deployment, leader_address, leader_worker_set, pod_spec
from flashfleet.launch import ContainerLaunch
from flashfleet.recipes import Recipe

ROUTER = "router"  # the router's instance name in the recipe
BOOTSTRAP_FLAG = "--disaggregation-bootstrap-port"  # a prefill's KV bootstrap server, for decode


def is_cluster(recipe: Recipe) -> bool:
    return any(p.instance for p in recipe.processes)


def instance_nodes(recipe: Recipe) -> dict[str, list[int]]:
    """Each instance's nodes, rank 0 first, in the recipe's order (the router left out)."""
    out: dict[str, list[int]] = {}
    for p in recipe.processes:
        if p.instance != ROUTER and p.node not in out.setdefault(p.instance, []):
            out[p.instance].append(p.node)
    return out


def pd_version(recipe: Recipe, launches: Sequence[ContainerLaunch]) -> str | None:
    """A PD group's version: a hash of every prefill's and decode's launch (image, argv, env), as
    rendered with symbolic addresses; None for any other topology.

    A prefill hands its KV to a decode, and two of different versions would exchange layouts they
    do not share. So each PD instance's workload is named after the whole group's version: any
    change renames every one of them, the router's argv names the new ones only, and the Pulumi
    program deletes the old group before it creates the new one (the hosts' cut, on Kubernetes).
    """
    if recipe.topology != "pd":
        return None
    routers = {p.name for p in recipe.processes if p.instance == ROUTER}
    shared = [launch.model_dump(mode="json") for launch in launches if launch.name not in routers]
    return hashlib.sha256(json.dumps(shared, sort_keys=True).encode()).hexdigest()[:6]


def cluster_addresses(
    stack: str, namespace: str, recipe: Recipe, *, leader_worker_set: bool, version: str | None = None
) -> list[str]:
    """The address of every recipe node: its instance's stable DNS name (``recipe`` rendered with
    any addresses: only its shape is read); ``version``: a PD group's (pd_version)."""
    count = len({p.node for p in recipe.processes})
    addresses = [f"{names.router_name(stack)}.{namespace}"] * count  # a node of the router's own
    for instance, nodes in instance_nodes(recipe).items():
        workload = names.instance_name(stack, instance, version)
        if len(nodes) == 1:
            address = f"{workload}.{namespace}"
        elif leader_worker_set:
            if len(workload) > names.MAX_LWS_NAME:
                raise KubernetesRenderError(
                    "stack",
                    f"{stack!r} is too long for this stack's LeaderWorkerSet {workload!r}: its name "
                    f"(the stack's, the instance's and the PD version's) may have at most "
                    f"{names.MAX_LWS_NAME} characters",
                )
            address = leader_address(workload, namespace)
        else:
            raise KubernetesRenderError(
                "nodes.source.leaderWorkerSet",
                f"{instance} runs on {len(nodes)} nodes: a cluster's multi-node instances are "
                "LeaderWorkerSets (set leaderWorkerSet: true, with the LWS controller installed)",
            )
        for node in nodes:
            addresses[node] = address
    return addresses


def cluster_workloads(
    stack: str,
    namespace: str,
    *,
    recipe: Recipe,
    launches: Sequence[ContainerLaunch],
    res: PodResources,
    shape: PodShape,
    router_shape: PodShape,
    version: str | None = None,
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """Every instance's workload (and a one-node instance's Service), then the router's
    Deployment; and the workloads' names, the router last. ``version``: a PD group's, on every
    instance's objects and the router's pod (pd_version)."""
    instance_of = {p.name: p.instance for p in recipe.processes}
    objects: list[dict[str, Any]] = []
    workloads: list[str] = []
    versioned = {names.LABEL_PD_VERSION: version} if version else {}
    for instance, nodes in instance_nodes(recipe).items():
        own = [launch for launch in launches if instance_of[launch.name] == instance]
        name = names.instance_name(stack, instance, version)
        extra = {names.LABEL_CLUSTER_INSTANCE: instance, **versioned}
        if len(nodes) == 1:
            objects.append(
                deployment(
                    name,
                    namespace,
                    stack,
                    instance,
                    pod_spec(own, res, shape),
                    endpoint=False,
                    extra_labels=extra,
                )
            )
            objects.append(_instance_service(stack, namespace, instance, own, version))
        else:
            ranks = [[launch for launch in own if launch.node == node] for node in nodes]
            if any(len(group) != 1 for group in ranks):
                raise KubernetesRenderError(
                    "topology", f"{instance}: multi-node instances run one process per node"
                )
            objects.append(
                leader_worker_set(
                    name,
                    namespace,
                    stack=stack,
                    ranks=[group[0] for group in ranks],
                    res=res,
                    shape=shape,
                    pod=instance,
                    endpoint=False,
                    extra_labels=extra,
                )
            )
        workloads.append(name)
    (router,) = [launch for launch in launches if instance_of[launch.name] == ROUTER]
    # The router waits for workers in other pods, which no pod spec can express: the component
    # creates its Deployment once the instances' workloads are ready, and the router itself
    # retries a worker that is not serving yet.
    router = router.model_copy(update={"start_after": ()})
    objects.append(
        deployment(
            names.router_name(stack),
            namespace,
            stack,
            ROUTER,
            pod_spec([router], replace(res, gpu_claim=None), router_shape),  # no share of the GPUs' claim
            endpoint=True,
            component=ROUTER,
            extra_labels={names.LABEL_CLUSTER_INSTANCE: ROUTER, **versioned},
        )
    )
    workloads.append(names.router_name(stack))
    return objects, tuple(workloads)


def _instance_service(
    stack: str, namespace: str, instance: str, launches: Sequence[ContainerLaunch], version: str | None
) -> dict[str, Any]:
    """A headless Service: the instance's DNS name resolves to its pod, on every port (a prefill's
    bootstrap server too), without a virtual IP between the router and the worker."""
    ports = [
        {"name": port_name(launch), "port": launch.port, "targetPort": launch.port, "protocol": "TCP"}
        for launch in launches
        if launch.serves_api
    ]
    for launch in launches:
        if BOOTSTRAP_FLAG in launch.argv:
            port = int(launch.argv[launch.argv.index(BOOTSTRAP_FLAG) + 1])
            ports.append({"name": "bootstrap", "port": port, "targetPort": port, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": names.metadata(
            names.instance_name(stack, instance, version),
            namespace,
            names.labels(
                stack,
                "serve",
                **{names.LABEL_CLUSTER_INSTANCE: instance},
                **({names.LABEL_PD_VERSION: version} if version else {}),
            ),
        ),
        "spec": {
            "clusterIP": "None",
            # Resolvable while the model loads: the router checks the worker's health itself.
            "publishNotReadyAddresses": True,
            # the version too: a Service of the new group never reaches a pod of the old one
            "selector": {
                **names.selector(stack, instance),
                **({names.LABEL_PD_VERSION: version} if version else {}),
            },
            "ports": ports,
        },
    }
