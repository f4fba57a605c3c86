"""A stack on the ``kubernetes`` source -> plain Kubernetes manifest dicts, in apply order.

Pure: no pulumi import. The recipe is rendered with the stable DNS name of rank 0's pod as the
rendezvous address (a cluster's: each instance's, which its router lists too), so every
container's argv is the recipe engine's, and the container launches (``flashfleet.launch``) are
the only description of how each process runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flashfleet.catalog import hardware_catalog
from flashfleet.k8s import mooncake as mc
from flashfleet.k8s import names, prepull, weights
from flashfleet.k8s import replicas as kc
from flashfleet.k8s.containers import CACHE_VOLUME, GPU_RESOURCES, MOONCAKE_VOLUME, PodResources
from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.k8s.namespace_owner import mark
from flashfleet.k8s.workloads import (
    PodShape,
    deployment,
    leader_worker_set,
    pod_spec,
    rank_addresses,
    rank_stateful_sets,
    shares_gpus,
)
from flashfleet.launch import SECRET_ENV_NAMES, ContainerLaunch, LaunchSettings, container_launches
from flashfleet.recipes import Recipe
from flashfleet.recipes.layouts import SERVE_PORT, api_base
from flashfleet.stack.kubernetes_source import HostPathCache, KubernetesSource, NodePool, PvcCache
from flashfleet.stack.spec import Mooncake

RecipeFor = Callable[[Sequence[str] | None], Recipe]
SCHEDULING_API = "scheduling.k8s.io/v1alpha2"  # the Workload API's PodGroup (Kubernetes v1.36)


@dataclass(frozen=True)
class KubernetesPlan:
    stack: str
    namespace: str
    recipe: Recipe
    launches: tuple[ContainerLaunch, ...]
    objects: tuple[dict[str, Any], ...]  # apply order; the Secret is the component's (its value)
    secret_name: str
    endpoint_service: str
    workloads: tuple[str, ...]  # Deployments, StatefulSets or LeaderWorkerSets serving the model
    router: str | None  # a cluster's router Deployment (the last workload); None for one instance
    weights_job: str | None  # the Job the workloads wait for, when the cache is shared
    server_pod_gpus: tuple[int, ...] = ()  # the GPUs each server pod takes, one entry a pod
    pd_version: str | None = None  # a PD cluster's group version, which its instances' names end in

    @property
    def endpoint(self) -> str:
        return api_base(f"{self.endpoint_service}.{self.namespace}.svc")

    def token_secret(self, token: object) -> dict[str, Any]:
        """The HF token Secret; ``token`` is its value (in the component, a Pulumi secret Output)."""
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": names.metadata(self.secret_name, self.namespace, names.labels(self.stack, "token")),
            "type": "Opaque",
            "stringData": {key: token for key in SECRET_ENV_NAMES},
        }


def plan_kubernetes(
    stack: str,
    source: KubernetesSource,
    *,
    hardware: str,
    nodes: int,
    recipe_for: RecipeFor,
    settings: LaunchSettings,
    mooncake: Mooncake | None = None,
) -> KubernetesPlan:
    """Render the recipe for the cluster and every object that serves it.

    ``recipe_for(addresses)`` is ``StackPlan.recipe_for``: the stack's recipe with the nodes'
    addresses (None: symbolic ones, for one node; a cluster's shape is read from that render).
    """
    names.check_stack_name(stack)
    ns = source.namespace
    pool = _pool(source, hardware)
    if settings.image.derived:
        raise KubernetesRenderError(
            "image.derived",
            "the derived image is built on each host by the sglang_image role; a Kubernetes cluster "
            "pulls its images: set image.derived: false to run the pinned upstream release",
        )
    shape_only = recipe_for(None)
    cluster = kc.is_cluster(shape_only)
    version = kc.pd_version(shape_only, container_launches(shape_only, settings)) if cluster else None
    if cluster:
        addresses: list[str] | None = kc.cluster_addresses(
            stack, ns, shape_only, leader_worker_set=source.leader_worker_set, version=version
        )
    elif nodes > 1:
        addresses = rank_addresses(stack, ns, nodes, leader_worker_set=source.leader_worker_set)
    else:
        addresses = None
    recipe = recipe_for(addresses) if addresses is not None else shape_only
    launches = container_launches(recipe, settings)
    l3 = recipe.options.hicache == "l1l2l3"
    if l3 and mooncake is None:
        raise KubernetesRenderError("mooncake", "hicache l1l2l3 needs the stack's mooncake section")
    vendor = hardware_catalog()[hardware].vendor
    image = launches[0].image
    placement = _placement(pool)
    secret = names.secret_name(stack)

    objects: list[dict[str, Any]] = []
    if source.create_namespace:
        # Labels without the stack's name: stacks may share a namespace. With none, a server-side
        # apply owns no field of it, and the second apply changes it (the server records the
        # fields it already had under a manager of its own). The annotation names the stack that
        # created it: the evidence that its `down` may delete it (namespace_owner).
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": names.shared_labels(), "annotations": mark(stack)},
            }
        )

    cache_volume = _cache_volume(stack, source)
    shared_cache = (
        isinstance(source.model_cache, PvcCache) and source.model_cache.access_mode == "ReadWriteMany"
    )
    # What loads the model: a cluster's router gets a pod of its own, without the cache.
    routers = {p.name for p in recipe.processes if p.instance == kc.ROUTER}
    serving = [launch for launch in launches if launch.name not in routers]
    pods = sorted({launch.node for launch in serving})
    if not shared_cache and isinstance(source.model_cache, PvcCache) and len(pods) > 1:
        raise KubernetesRenderError(
            "nodes.source.modelCache.accessMode",
            f"{len(pods)} pods on different nodes cannot share a ReadWriteOnce claim: use ReadWriteMany",
        )
    if isinstance(source.model_cache, PvcCache):
        objects.append(_claim(stack, ns, source.model_cache))
    # Created beside the download, never after it: see flashfleet/k8s/prepull.py.
    serving_images = sorted({launch.image for launch in launches})
    objects.append(prepull.pre_pull(stack, ns, serving_images, source.pause_image, placement))
    objects.append(weights.program_config(stack, ns))
    downloads = weights.downloads(
        recipe, source.download_image, secret, settings, names.weights_program(stack)
    )
    job_name = None
    if l3:
        assert mooncake is not None
        objects += mc.objects(stack, ns, mooncake, image, placement)
    if shared_cache:
        job_name = names.weights_job(stack)
        objects.append(
            weights.download_job(
                job_name,
                ns,
                names.labels(stack, "weights"),
                downloads=downloads,
                cache_volume=cache_volume,
                placement=placement,
            )
        )

    volumes = [cache_volume, downloads.token_volume]
    if not shared_cache:
        volumes += [downloads.client_volume, downloads.program_volume]
    if l3:
        volumes.append(
            {
                "name": MOONCAKE_VOLUME,
                "configMap": {
                    "name": names.mooncake_config(stack),
                    "items": [{"key": mc.CONFIG_KEY, "path": mc.CONFIG_KEY}],
                },
            }
        )
    by_node = {node: [launch for launch in serving if launch.node == node] for node in pods}
    pod_gpus = _check_pods_fit(pool, hardware, by_node)
    gpu_sharing = any(shares_gpus(group) for group in by_node.values())
    claim_template = names.gpu_claim_template(stack) if gpu_sharing else None
    if gpu_sharing:
        objects.append(_gpu_claim_template(stack, ns, pool, by_node[pods[0]]))
    shape = PodShape(
        placement=placement,
        volumes=volumes,
        init_downloads=[] if shared_cache else [downloads.install, *downloads.containers],
        gpu_claim_template=claim_template,
    )
    res = PodResources(
        secret_name=secret,
        vendor=vendor,
        server=pool.server_resources,
        gpu_claim="gpus" if gpu_sharing else None,
        rdma_resources=dict(pool.rdma_resources),
        rdma_required=l3 and mooncake is not None and mooncake.protocol != "tcp",
        mooncake_l3=l3,
    )

    serve = names.serve_name(stack)
    router = None
    workloads: tuple[str, ...]
    if cluster:
        # The router's pod: the stack's node placement (the image is pre-pulled there), no GPU,
        # no model cache, no token.
        router_shape = PodShape(placement=placement, volumes=[], init_downloads=[], gpu_claim_template=None)
        made, workloads = kc.cluster_workloads(
            stack,
            ns,
            recipe=recipe,
            launches=launches,
            res=res,
            shape=shape,
            router_shape=router_shape,
            version=version,
        )
        objects += made
        router = workloads[-1]
    elif len(pods) == 1:
        group = by_node[pods[0]]
        objects.append(deployment(serve, ns, stack, "serve", pod_spec(group, res, shape), endpoint=True))
        workloads = (serve,)
    else:
        ranks = [group[0] for group in by_node.values()]
        if any(len(group) != 1 for group in by_node.values()):
            raise KubernetesRenderError("topology", "multi-node stacks run one process per node")
        if source.leader_worker_set:
            objects.append(leader_worker_set(serve, ns, stack=stack, ranks=ranks, res=res, shape=shape))
            workloads = (serve,)
        else:
            objects += rank_stateful_sets(stack, ns, ranks, res, shape)
            workloads = tuple(names.rank_name(stack, launch.node) for launch in ranks)
    if source.gang_scheduling:
        objects = _gang_scheduled(objects, source)
    objects.append(_endpoint_service(stack, ns, source))
    return KubernetesPlan(
        stack=stack,
        namespace=ns,
        recipe=recipe,
        launches=tuple(launches),
        objects=tuple(objects),
        secret_name=secret,
        endpoint_service=names.endpoint_service(stack),
        workloads=workloads,
        router=router,
        weights_job=job_name,
        server_pod_gpus=pod_gpus,
        pd_version=version,
    )


def _gang_scheduled(objects: list[dict[str, Any]], source: KubernetesSource) -> list[dict[str, Any]]:
    """Each LeaderWorkerSet's pods join a PodGroup of the Workload API (Kubernetes v1.36, alpha)
    whose gang wants every rank, made just before the set: the scheduler binds none of a group
    until all of it fits, so a short group holds no node's GPUs."""
    if not source.leader_worker_set:
        raise KubernetesRenderError(
            "nodes.source.gangScheduling",
            "gang scheduling is rendered for LeaderWorkerSets: set leaderWorkerSet: true",
        )
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            md, lwt = obj["metadata"], obj["spec"]["leaderWorkerTemplate"]
            out.append(
                {
                    "apiVersion": SCHEDULING_API,
                    "kind": "PodGroup",
                    "metadata": names.metadata(md["name"], md["namespace"], md["labels"]),
                    "spec": {"schedulingPolicy": {"gang": {"minCount": lwt["size"]}}},
                }
            )
            for role in ("leaderTemplate", "workerTemplate"):
                lwt[role]["spec"]["schedulingGroup"] = {"podGroupName": md["name"]}
        out.append(obj)
    return out


def _pool(source: KubernetesSource, hardware: str) -> NodePool:
    if hardware not in source.node_pools:
        raise KubernetesRenderError(
            "nodes.source.nodePools",
            f"no node pool for {hardware}: say which nodes carry it (nodeSelector, tolerations)",
        )
    return source.node_pools[hardware]


def _check_pods_fit(
    pool: NodePool, hardware: str, by_node: dict[int, list[ContainerLaunch]]
) -> tuple[int, ...]:
    """The GPUs each server pod takes; refuses, before anything is applied, a pod that asks for
    more than a pool node offers: the scheduler would leave it Pending."""
    hw = hardware_catalog()[hardware]
    offered = pool.gpus_per_node or hw.gpus_per_node
    out = []
    for node, group in by_node.items():
        gpus = [gpu for launch in group for gpu in launch.gpus]
        wanted = len(set(gpus)) if shares_gpus(group) else len(gpus)
        if wanted > offered:
            whose = "gpusPerNode" if pool.gpus_per_node else f"the {hw.label} node's GPUs"
            raise KubernetesRenderError(
                f"nodes.source.nodePools.{hardware}.gpusPerNode",
                f"the pod of node {node} ({', '.join(launch.name for launch in group)}) asks for "
                f"{wanted} {GPU_RESOURCES[hw.vendor]}; each node of the pool offers {offered} ({whose})",
            )
        if wanted:  # a pod without GPUs asks the pool for none
            out.append(wanted)
    return tuple(out)


def _placement(pool: NodePool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if pool.node_selector:
        out["nodeSelector"] = dict(pool.node_selector)
    if pool.tolerations:
        out["tolerations"] = [t.manifest() for t in pool.tolerations]
    return out


def _cache_volume(stack: str, source: KubernetesSource) -> dict[str, Any]:
    cache = source.model_cache
    if isinstance(cache, HostPathCache):
        return {"name": CACHE_VOLUME, "hostPath": {"path": cache.path, "type": "DirectoryOrCreate"}}
    return {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": names.model_cache_claim(stack)}}


def _claim(stack: str, ns: str, cache: PvcCache) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": names.metadata(names.model_cache_claim(stack), ns, names.labels(stack, "model-cache")),
        "spec": {
            "accessModes": [cache.access_mode],
            "storageClassName": cache.storage_class,
            "resources": {"requests": {"storage": cache.size}},
        },
    }


def _gpu_claim_template(
    stack: str, ns: str, pool: NodePool, group: Sequence[ContainerLaunch]
) -> dict[str, Any]:
    """One DRA claim for the GPUs the pod's processes share (encoder disaggregation)."""
    if pool.gpu_device_class is None:
        raise KubernetesRenderError(
            "nodes.source.nodePools.gpuDeviceClass",
            f"{', '.join(launch.name for launch in group)} share their GPUs, which device-plugin "
            "limits cannot express (each container gets GPUs of its own): name the cluster's DRA "
            "device class for these GPUs (e.g. gpu.nvidia.com)",
        )
    count = len({gpu for launch in group for gpu in launch.gpus})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": names.metadata(names.gpu_claim_template(stack), ns, names.labels(stack, "serve")),
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": pool.gpu_device_class,
                                "allocationMode": "ExactCount",
                                "count": count,
                            },
                        }
                    ]
                }
            }
        },
    }


def _endpoint_service(stack: str, ns: str, source: KubernetesSource) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": source.service_type,
        "selector": {names.LABEL_INSTANCE: stack, names.LABEL_ENDPOINT: "true"},
        "ports": [{"name": "http", "port": SERVE_PORT, "targetPort": SERVE_PORT, "protocol": "TCP"}],
    }
    if source.service_type == "LoadBalancer":
        # The endpoint takes no API key: the load balancer admits only the stack's client networks.
        spec["loadBalancerSourceRanges"] = [str(c) for c in source.load_balancer_source_ranges]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": names.metadata(names.endpoint_service(stack), ns, names.labels(stack, "endpoint")),
        "spec": spec,
    }
