"""A stack's renders: the recipe engine's render of the stack's hardware, strategy, topology,
options and serving shape, on the Kubernetes source its manifests, and a RecipeError turned into
a problem that names the stack key it comes from."""

from __future__ import annotations

from typing import Any

from flashfleet.k8s import KubernetesPlan, plan_kubernetes
from flashfleet.launch import LaunchSettings
from flashfleet.planning.packages import locked_for, pip_installs
from flashfleet.recipes import Recipe, RecipeError, render
from flashfleet.stack.errors import Problem
from flashfleet.stack.kubernetes_source import KubernetesSource, PvcCache
from flashfleet.stack.lock import StackLock
from flashfleet.stack.spec import SHAPE_KEYS, AwsSource, ExistingSource, StackSpec

# Recipe fields that are keys of the stack itself, not options.
_TOP_LEVEL = {"hardware": "hardware", "strategy": "strategy", "topology": "topology", "image": "image"}


def recipe_path(spec: StackSpec | None, field: str) -> str:
    """The stack key a RecipeError's field comes from."""
    if field in _TOP_LEVEL:
        return _TOP_LEVEL[field]
    if field == "nodes":
        return "cluster.nodesPerInstance" if spec is not None and spec.cluster else "nodes.count"
    if field in SHAPE_KEYS and spec is not None and spec.cluster:
        return SHAPE_KEYS[field]
    # Unknown or misspelled option names arrive as written in the stack.
    return f"options.{field}"


def shape_overrides(spec: StackSpec) -> dict[str, Any]:
    """The recipe options the stack's nodes and cluster section set."""
    cluster = spec.cluster
    if cluster is None:
        return {"nodes": spec.nodes.count}  # one instance over every node
    shape: dict[str, Any] = {"nodes": cluster.nodes_per_instance, "router_policy": cluster.router.policy}
    if cluster.replicas is not None:
        shape["replicas"] = cluster.replicas
    else:
        shape["prefill"], shape["decode"] = cluster.prefill, cluster.decode
    return shape


def router_node(spec: StackSpec) -> int | None:
    """The node of the router's own: its existing host (cluster.router.host), or on AWS its CPU
    instance (cluster.router.instanceType), the last node, after every instance's; None: the
    router runs beside instance 0.

    A host that is not one of the existing hosts, or an instance type off AWS, is
    checks.check_cluster's to refuse."""
    cluster = spec.cluster
    if cluster is None:
        return None
    src = spec.nodes.source
    if cluster.router.instance_type is not None and isinstance(src, AwsSource):
        return cluster.instances * cluster.nodes_per_instance
    host = cluster.router.host
    if host is None or not isinstance(src, ExistingSource):
        return None
    addresses = [h.address for h in src.hosts]
    return addresses.index(host) if host in addresses else None


def render_stack(spec: StackSpec, addresses: list[str] | None = None) -> Recipe:
    # The release image (image.derived false) has no smg: its own sglang_router fronts the workers.
    program = {"router": spec.router_program} if spec.router_program else {}
    overrides = {**program, **spec.options, **shape_overrides(spec)}
    return render(
        spec.hardware,
        spec.strategy,
        spec.topology,
        overrides,
        addresses=addresses,
        router_node=router_node(spec),
    )


def cache_volume_is_one_nodes(spec: StackSpec) -> bool:
    """Whether the stack's cache volume is one node's own (a host's disk, a hostPath, a
    ReadWriteOnce PVC), not a ReadWriteMany PVC every server pod shares on network storage."""
    src = spec.nodes.source
    return not (
        isinstance(src, KubernetesSource)
        and isinstance(src.model_cache, PvcCache)
        and src.model_cache.access_mode == "ReadWriteMany"
    )


def jit_cache_on_own_disk(spec: StackSpec) -> bool:
    """Whether the compile caches go on the cache volume (caches.jit): only where it is one
    node's. On a shared PVC the pods would build into, and load from, one folder at the same
    time, so their caches stay in the containers."""
    return spec.caches.jit and cache_volume_is_one_nodes(spec)


def launch_settings(
    spec: StackSpec, *, api_key: bool = False, lock: StackLock | None = None
) -> LaunchSettings:
    """How the stack's containers run: the one place that reads them from the spec (and what of
    the stack's lock they need: the weights, and the download client's files)."""
    client = locked_for(pip_installs(spec), lock, "model_weights").get("huggingface_hub")
    return LaunchSettings(
        image=spec.image,
        model_cache_dir=spec.model_cache_dir,
        api_key=api_key,
        weights_lock=dict(lock.weights) if lock is not None else {},
        client_lock=client,
        jit_cache=jit_cache_on_own_disk(spec),
    )


def kubernetes_plan(stack: str, spec: StackSpec, lock: StackLock | None = None) -> KubernetesPlan:
    """The stack's manifests (raises KubernetesRenderError, RecipeError); ``lock``: the stack's
    lock, whose weights and client the download containers fetch and check."""
    src = spec.nodes.source
    assert isinstance(src, KubernetesSource)
    return plan_kubernetes(
        stack,
        src,
        hardware=spec.hardware,
        nodes=spec.nodes.count,
        recipe_for=lambda addresses: render_stack(spec, None if addresses is None else list(addresses)),
        settings=launch_settings(spec, lock=lock),
        mooncake=spec.mooncake,
    )


def recipe_problem(spec: StackSpec, err: RecipeError, base: str) -> Problem:
    return Problem(f"{base}.{recipe_path(spec, err.field)}", err.message, err.rule)
