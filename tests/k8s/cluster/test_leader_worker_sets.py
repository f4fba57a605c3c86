"""Multi-node instances made by the real LeaderWorkerSet controller: flashfleet's rendered sets are
applied, the controller makes each group's leader and worker pods through its webhooks, the
scheduler puts one pod on each node of the pool, every pod's command resolves to its rank's argv
with the leader's address, the endpoint Service reaches only the leader, a lost worker brings
its whole group back, and a group short of nodes never becomes available."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from control_plane import ControlPlane
from k8s_cases import GB300_PD_LWS, GB300_TP16, H200_LWS, H200_REPLICAS_LWS, MI355X_LWS, Case, source
from sim_nodes import add_plain_node, add_pool_nodes, provision_claims
from test_api_server import all_objects

from flashfleet.cli.shared.cluster_api import serving_objects
from flashfleet.k8s import KubernetesPlan, names, readiness

SET_NAME = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
INJECTED = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")
REF = re.compile(r"\$\((\w+)\)")


@pytest.fixture
def cp(cluster: ControlPlane) -> Iterator[ControlPlane]:
    yield cluster
    cluster.reset()


def sets(plan: KubernetesPlan) -> list[dict[str, Any]]:
    return [o for o in plan.objects if o["kind"] == "LeaderWorkerSet"]


def the_set(plan: KubernetesPlan) -> dict[str, Any]:
    (lws,) = sets(plan)
    return lws


def group_pods(cp: ControlPlane, lws: dict[str, Any]) -> list[dict[str, Any]]:
    md = lws["metadata"]
    pods = cp.items("pods", namespace=md["namespace"], selector=f"{SET_NAME}={md['name']}")
    return sorted(
        (p for p in pods if "deletionTimestamp" not in p["metadata"]), key=lambda p: p["metadata"]["name"]
    )


def available(cp: ControlPlane, lws: dict[str, Any]) -> bool:
    got = cp.get("leaderworkerset", lws["metadata"]["name"], namespace=lws["metadata"]["namespace"])
    status = (got or {}).get("status") or {}
    up = any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions") or [])
    return up and status.get("readyReplicas") == 1


def bring_up(
    cp: ControlPlane, case: Case, nodes: int, *, gpus: int | None = None
) -> tuple[KubernetesPlan, list[str]]:
    pool = add_pool_nodes(cp, case.source, case.hardware, nodes, prefix=f"{case.hardware}-gpu", gpus=gpus)
    add_plain_node(cp, "cpu-0")
    plan = case.plan()
    provision_claims(cp, list(plan.objects))
    cp.apply(all_objects(plan))
    return plan, pool


def wait_available(cp: ControlPlane, lws: dict[str, Any]) -> list[dict[str, Any]]:
    ns, size = lws["metadata"]["namespace"], lws["spec"]["leaderWorkerTemplate"]["size"]
    cp.wait_for(lambda: available(cp, lws), what=f"{lws['metadata']['name']} available", namespace=ns,
                timeout_s=120)  # fmt: skip
    return cp.wait_for(
        lambda: (pods := group_pods(cp, lws)) and len(pods) == size
        and all(p["status"].get("phase") == "Running" for p in pods) and pods,
        what=f"{size} Running pods of the group", namespace=ns,
    )  # fmt: skip


def expand(word: str, env: dict[str, str]) -> str:
    """What the kubelet runs: each $(VAR) of the container's env replaced by its value."""
    return REF.sub(lambda m: env.get(m.group(1), m.group(0)), word)


def assert_resolved(plan: KubernetesPlan, lws: dict[str, Any], pods: list[dict[str, Any]]) -> set[str]:
    """Each pod as the API server holds it after the webhook: with concrete LWS values, and a
    command that resolves, through them alone, to its rank's rendered argv. Returns the nodes,
    one a pod."""
    name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
    lwt = lws["spec"]["leaderWorkerTemplate"]
    size = lwt["size"]
    leader = f"{name}-0.{name}.{ns}"  # the controller's headless Service names the leader
    assert [p["metadata"]["name"] for p in pods] == [f"{name}-0", *(f"{name}-0-{i}" for i in range(1, size))]
    # the launches of this instance: server-0.. or prefill-0-rank-0..
    prefix = lwt["leaderTemplate"]["spec"]["containers"][0]["name"].rsplit("-", 1)[0]
    argv = {launch.name: list(launch.argv) for launch in plan.launches}
    for pod in pods:
        (c,) = pod["spec"]["containers"]
        env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
        index = pod["metadata"]["labels"][WORKER_INDEX]
        assert {k: env[k] for k in INJECTED} == {
            "LWS_LEADER_ADDRESS": leader, "LWS_GROUP_SIZE": str(size), "LWS_WORKER_INDEX": index,
        }  # fmt: skip
        refs = {m for w in c["command"] for m in REF.findall(w)}
        assert refs <= set(env), f"{pod['metadata']['name']} refers to undefined {refs - set(env)}"
        command = [expand(w, env) for w in c["command"]]
        assert not [w for w in command if "$(" in w]
        assert command == argv[f"{prefix}-{index}"]
        assert command[command.index("--node-rank") + 1] == index
        host = command[command.index("--dist-init-addr") + 1].rsplit(":", 1)[0]
        assert host == env["LWS_LEADER_ADDRESS"]
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert len(nodes) == len(pods)
    return nodes


def ready_endpoints(cp: ControlPlane, plan: KubernetesPlan) -> set[str]:
    def got() -> set[str] | None:
        sel = f"kubernetes.io/service-name={plan.endpoint_service}"
        names_ = {
            e["targetRef"]["name"]
            for s in cp.items("endpointslices", namespace=plan.namespace, selector=sel)
            for e in s.get("endpoints") or []
            if e["conditions"].get("ready")
        }
        return names_ or None

    found: set[str] = cp.wait_for(got, what=f"endpoints of {plan.endpoint_service}")
    return found


def assert_endpoint_is_the_leader(cp: ControlPlane, plan: KubernetesPlan, pods: list[dict[str, Any]]) -> None:
    leader = pods[0]["metadata"]["name"]
    svc = cp.get("service", plan.endpoint_service, namespace=plan.namespace)
    selector = svc["spec"]["selector"]
    chosen = [p["metadata"]["name"] for p in pods if selector.items() <= p["metadata"]["labels"].items()]
    assert chosen == [leader]
    assert ready_endpoints(cp, plan) == {leader}


@pytest.mark.parametrize("case", [GB300_TP16, H200_LWS, MI355X_LWS], ids=lambda c: c.stack)
def test_the_controller_makes_one_pod_a_node_with_resolved_ranks(cp: ControlPlane, case: Case) -> None:
    plan, pool = bring_up(cp, case, case.nodes)
    pods = wait_available(cp, the_set(plan))
    assert assert_resolved(plan, the_set(plan), pods) == set(pool)  # one pod a node, all of the pool
    assert_endpoint_is_the_leader(cp, plan, pods)
    if case is GB300_TP16:
        (c,) = pods[0]["spec"]["containers"]
        assert c["command"][c["command"].index("--tp-size") + 1] == "16"


def test_pd_runs_one_set_per_instance_of_each_role(cp: ControlPlane) -> None:
    """PD across nodes, each instance over 2 nodes: a LeaderWorkerSet per instance (not one
    DisaggregatedSet), each group on its own nodes with its own leader, and the router alone
    behind the endpoint Service."""
    plan, pool = bring_up(cp, GB300_PD_LWS, 4)
    by_role = {o["metadata"]["labels"][names.LABEL_CLUSTER_INSTANCE]: o for o in sets(plan)}
    assert sorted(by_role) == ["decode-0", "prefill-0"]
    nodes: list[str] = []
    for lws in by_role.values():
        nodes += assert_resolved(plan, lws, wait_available(cp, lws))
    assert sorted(nodes) == sorted(pool)  # four ranks, four nodes, no two groups on one
    (router,) = ready_endpoints(cp, plan)
    assert router.startswith(f"{plan.stack}-router-")


def test_a_lost_worker_brings_its_whole_group_back(cp: ControlPlane) -> None:
    """A tensor-parallel group that loses a rank cannot go on: the set's
    RecreateGroupOnPodRestart has the controller recreate every pod of the group."""
    plan, pool = bring_up(cp, H200_LWS, 2)
    assert the_set(plan)["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    lws = the_set(plan)
    before = wait_available(cp, lws)
    old = {p["metadata"]["uid"] for p in before}
    cp.kubectl("delete", "pod", before[1]["metadata"]["name"], "-n", plan.namespace, "--wait=false")

    def new_group() -> list[dict[str, Any]] | None:
        pods = group_pods(cp, lws)
        fresh = len(pods) == 2 and not old & {p["metadata"]["uid"] for p in pods}
        running = all(p["status"].get("phase") == "Running" for p in pods)
        return pods if fresh and running and available(cp, lws) else None

    # the leader too is new: the group was recreated, not just the lost pod
    after = cp.wait_for(new_group, what="a whole new group", namespace=plan.namespace, timeout_s=120)
    assert assert_resolved(plan, lws, after) == set(pool)


def test_a_group_short_of_nodes_is_never_available(cp: ControlPlane) -> None:
    """No gang scheduler: the leader takes the one node there is and the worker waits, Pending with
    the scheduler's reason; the set never reports the group available (`flashfleet up` refuses such
    a pool before applying: tests/k8s/test_k8s_nodes_fit.py)."""
    plan, _ = bring_up(cp, MI355X_LWS, 1, gpus=4)  # one rank's GPUs
    ns = plan.namespace

    def pending_worker() -> str | None:
        for pod in group_pods(cp, the_set(plan)):
            for c in pod["status"].get("conditions", []):
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return str(c["message"])
        return None

    message = cp.wait_for(pending_worker, what="a worker refused by the scheduler", namespace=ns)
    assert "Insufficient amd.com/gpu" in message
    assert not available(cp, the_set(plan))


def test_status_names_a_group_degraded_while_the_controller_heals_it(
    cp: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `flashfleet status` reads of a Kubernetes stack: the workloads and pods as the API
    server holds them. Two replicas, each a group over 2 nodes: a deleted worker makes its
    replica not ready (degraded, named) at once, and it stays so until the controller has made
    the whole group again; the router and the other replica stay ready throughout."""
    monkeypatch.setenv("KUBECONFIG", str(cp.kubeconfig))
    plan, _ = bring_up(cp, H200_REPLICAS_LWS, 4)
    ns, sel = plan.namespace, f"{names.LABEL_INSTANCE}={plan.stack}"

    def judged() -> readiness.KubernetesHealth:
        return readiness.health(plan, *serving_objects(None, ns, sel))

    cp.wait_for(lambda: judged().state == "serving", what="every workload ready", namespace=ns, timeout_s=120)
    assert judged().line() == f"endpoint: serving: 3 of 3 workloads ready in namespace {ns}"
    lws = next(s for s in sets(plan) if s["metadata"]["labels"][names.LABEL_CLUSTER_INSTANCE] == "replica-1")
    before = group_pods(cp, lws)
    old = {p["metadata"]["uid"] for p in before}
    cp.kubectl("delete", "pod", before[1]["metadata"]["name"], "-n", ns, "--wait=false")
    seen: list[tuple[str, bool]] = []  # (state, whether the group is all new pods and Running)

    def healed() -> bool:
        health = judged()
        pods = group_pods(cp, lws)
        fresh = len(pods) == 2 and not old & {p["metadata"]["uid"] for p in pods}
        seen.append((health.state, fresh))
        if health.state == "degraded":
            (bad,) = health.not_ready
            assert bad.instance == "replica-1"
            assert bad.name == lws["metadata"]["name"]
            assert "replica-1 (LeaderWorkerSet" in health.line()
        return health.state == "serving"

    cp.wait_for(healed, what="the group healed", namespace=ns, timeout_s=120)
    print(f"states seen while healing: {seen}")
    assert seen[0][0] == "degraded"  # the first reading after the deletion
    assert {state for state, _ in seen} == {"degraded", "serving"}
    assert seen[-1] == ("serving", True)  # serving again only with the whole group new


def test_a_gang_podgroup_keeps_a_short_group_from_holding_any_node(cp: ControlPlane) -> None:
    """With the Workload API's gang scheduling (v1.36 alpha gates on) and `gangScheduling: true`:
    the set's templates name a PodGroup whose gang wants every rank. On one node for two ranks,
    the scheduler binds neither pod (the leader does not hold the node's GPUs); with a second
    node both are placed."""
    gang = dataclasses.replace(MI355X_LWS, source=source(leaderWorkerSet=True, gangScheduling=True))
    plan, _ = bring_up(cp, gang, 1, gpus=4)
    lws = the_set(plan)
    ns = plan.namespace
    pods = cp.wait_for(
        lambda: (p := group_pods(cp, lws)) and len(p) == 2 and p, what="both pods", namespace=ns
    )
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {lws["metadata"]["name"]}
    group = cp.get("podgroups.scheduling.k8s.io", lws["metadata"]["name"], namespace=ns)
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    cp.wait_for(
        lambda: any("waiting for minCount pods" in str(p["status"]) for p in group_pods(cp, lws)),
        what="the gang waiting", namespace=ns,
    )  # fmt: skip
    time.sleep(5)  # the scheduler has had more tries
    print("pods:", cp.pods_report(ns))
    assert [p["metadata"]["name"] for p in group_pods(cp, lws) if p["spec"].get("nodeName")] == []
    add_pool_nodes(cp, gang.source, "mi355x", 1, prefix="mi355x-more", gpus=4)
    wait_available(cp, lws)
