"""`flashfleet up` asks the cluster's nodes whether they hold the stack's server pods by GPUs
before anything is applied (the real API server's nodes: tests/k8s/cluster/test_pulumi_up.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from k8s_cases import GB300_PD_LWS, MI355X_LWS, POOLS, source

from flashfleet.k8s.fit import refusal
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan

SELECT = {"amd.com/gpu.product-name": "AMD_Instinct_MI355X"}
TAINT = {"key": "amd.com/gpu", "effect": "NoSchedule"}


def node(name: str, gpus: int, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {"name": name, "labels": SELECT if labels is None else labels},
        "spec": {"taints": [TAINT] if taints is None else taints, "unschedulable": unschedulable},
        "status": {"allocatable": {"amd.com/gpu": str(gpus), "cpu": "96"}},
    }


def verdict(stack: str, nodes: list[dict[str, Any]]) -> str | None:
    spec = load_stack(stack).spec
    pool = spec.nodes.source.node_pools["mi355x"]  # type: ignore[union-attr]
    return refusal(kubernetes_plan(stack, spec), pool, "amd", nodes)


def test_each_server_pod_is_counted_once_with_its_gpus() -> None:
    plan = kubernetes_plan("mi355x-k8s-replicas", load_stack("mi355x-k8s-replicas").spec)
    assert plan.server_pod_gpus == (4, 4)  # two replicas; the router has none


def test_nodes_that_hold_the_pods_pass() -> None:
    assert verdict("mi355x-k8s", [node("a", 8)]) is None
    assert verdict("mi355x-k8s-replicas", [node("a", 4), node("b", 4)]) is None
    assert verdict("mi355x-k8s-replicas", [node("a", 8)]) is None  # by GPUs, two fit one node


def test_too_few_gpus_are_refused_with_each_nodes_figure() -> None:
    why = verdict("mi355x-k8s-replicas", [node("a", 4), node("b", 2)])
    assert why == (
        "the pool's nodes (nodeSelector {'amd.com/gpu.product-name': 'AMD_Instinct_MI355X'}) hold 1 of the "
        "2 server pod(s) of 4 amd.com/gpu; allocatable amd.com/gpu per node: a: 4, b: 2"
    )


def test_nodes_outside_the_pool_do_not_count() -> None:
    others = [
        node("wrong-label", 8, labels={"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}),
        node("untolerated", 8, taints=[TAINT, {"key": "dedicated", "value": "db", "effect": "NoExecute"}]),
        node("cordoned", 8, unschedulable=True),
    ]
    why = verdict("mi355x-k8s", others)
    assert why is not None
    assert why.startswith("no schedulable node of the cluster matches the pool")
    # a PreferNoSchedule taint does not keep a pod off
    soft = node("soft", 8, taints=[TAINT, {"key": "x", "effect": "PreferNoSchedule"}])
    assert verdict("mi355x-k8s", [*others, soft]) is None


def test_a_leader_worker_set_needs_a_node_for_every_rank_of_its_group() -> None:
    """No gang scheduler runs beside the LeaderWorkerSet controller: a group short of nodes would
    hold some GPUs and never serve (tests/k8s/cluster/test_leader_worker_sets.py), so `up` refuses
    it before anything is applied."""
    plan = MI355X_LWS.plan()
    assert [o["kind"] for o in plan.objects].count("LeaderWorkerSet") == 1
    assert plan.server_pod_gpus == (4, 4)  # the leader's and the worker's
    pool = MI355X_LWS.source.node_pools["mi355x"]
    nodes = [node("a", 8, labels=dict(pool.node_selector))]
    assert refusal(plan, pool, "amd", nodes) is None  # by GPUs, both ranks fit one node of 8
    nodes = [node("a", 4, labels=dict(pool.node_selector)), node("b", 2, labels=dict(pool.node_selector))]
    why = refusal(plan, pool, "amd", nodes)
    assert why is not None
    assert "hold 1 of the 2 server pod(s) of 4 amd.com/gpu" in why


def test_pd_groups_over_nodes_are_refused_unless_every_group_fits_whole() -> None:
    """PD with each instance a group over 2 nodes (4 server pods of 4 GPUs): 3 nodes would place
    the prefill's group and half the decode's, which holds GPUs and never serves; `up` refuses
    the stack before anything is applied, by GPUs, naming every node's figure."""
    pools = {**POOLS, "gb300": {k: v for k, v in POOLS["gb300"].items() if k != "gpuDeviceClass"}}
    case = dataclasses.replace(GB300_PD_LWS, source=source(leaderWorkerSet=True, nodePools=pools))
    plan = case.plan()
    assert plan.server_pod_gpus == (4, 4, 4, 4)
    pool = case.source.node_pools["gb300"]
    labels = dict(pool.node_selector)

    def gb300(name: str) -> dict[str, Any]:
        made = node(name, 0, labels=labels, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
        made["status"]["allocatable"] = {"nvidia.com/gpu": "4"}
        return made

    assert refusal(plan, pool, "nvidia", [gb300(n) for n in "abcd"]) is None
    why = refusal(plan, pool, "nvidia", [gb300(n) for n in "abc"])
    assert why is not None
    assert (
        "hold 3 of the 4 server pod(s) of 4 nvidia.com/gpu; allocatable nvidia.com/gpu per node: a: 4, b: 4, c: 4"
        in why
    )
