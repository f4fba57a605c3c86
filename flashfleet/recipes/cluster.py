"""The serving shape of a recipe: one instance, replicas, or prefill/decode instances across
nodes, and the node each instance and the router take.

Pure placement: which nodes each instance owns and where the router runs. The processes
themselves are rendered in ``flashfleet.recipes.render``.
"""

from __future__ import annotations

from dataclasses import dataclass

from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.options import Options

# The router's program: SMG (PyPI smg, `smg launch`), the gateway that left SGLang's tree, which
# the derived image installs; or the release image's own sglang_router (`router: sglang_router`),
# for an image flashfleet does not derive (Kubernetes stacks), which has no smg.
ROUTERS: dict[str, tuple[str, ...]] = {
    "smg": ("smg", "launch"),
    "sglang_router": ("python", "-m", "sglang_router.launch_router"),
}
# what plan and the badges call each one
ROUTER_NAMES: dict[str, str] = {"smg": "SMG", "sglang_router": "the SGLang router"}


@dataclass(frozen=True)
class Instance:
    name: str  # replica-0, prefill-1, decode-0: what plan, status and the timeline call it
    role: str  # replica | prefill | decode
    nodes: tuple[int, ...]  # the nodes it owns, rank 0 first


@dataclass(frozen=True)
class ClusterShape:
    """Instances behind one router; ``instances`` is empty for a stack of one instance."""

    instances: tuple[Instance, ...]
    router_node: int | None  # None: one instance, no router beyond the layout's own
    own_router_node: bool  # the router has a node of its own (no worker on it)
    node_count: int

    @property
    def is_cluster(self) -> bool:
        return bool(self.instances)


def instance_roles(o: Options) -> list[tuple[str, int]]:
    """(role, index) of every instance of a cluster, prefill before decode; [] for one instance."""
    if o.prefill:
        return [("prefill", i) for i in range(o.prefill)] + [("decode", i) for i in range(o.decode)]
    if o.replicas > 1:
        return [("replica", i) for i in range(o.replicas)]
    return []


def describe(o: Options) -> str:
    """The shape in words: '2 replicas', '2 prefill + 1 decode (2P1D)', or '' for one instance."""
    if o.prefill:
        return f"{o.prefill} prefill + {o.decode} decode ({o.prefill}P{o.decode}D) across nodes"
    if o.replicas > 1:
        return f"{o.replicas} replicas"
    return ""


def cluster_shape(o: Options, router_node: int | None = None) -> ClusterShape:
    """Place the instances on nodes: each takes ``o.nodes`` nodes in order, skipping the router's
    own node when it has one (``router_node``); the router otherwise runs beside instance 0."""
    roles = instance_roles(o)
    if not roles:
        return ClusterShape((), None, False, o.nodes)
    total = len(roles) * o.nodes + (router_node is not None)
    if router_node is not None and not 0 <= router_node < total:
        raise RecipeError(
            "router", "router-node", f"router node {router_node} is not one of the {total} nodes"
        )
    free = [n for n in range(total) if n != router_node]
    instances = tuple(
        Instance(f"{role}-{i}", role, tuple(free[k * o.nodes : (k + 1) * o.nodes]))
        for k, (role, i) in enumerate(roles)
    )
    router = router_node if router_node is not None else instances[0].nodes[0]
    return ClusterShape(instances, router, router_node is not None, total)
