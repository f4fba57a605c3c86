"""Kubernetes stacks applied for real: the scheduler places every pod on the simulated GPU nodes
as rendered, the weights Job completes, the pre-pull DaemonSet lands on exactly the serving
nodes, the Services get endpoints, a second apply changes nothing, an option change rolls out
where GPUs cannot hold two copies, a pod that cannot fit stays Pending with the scheduler's
reason, and deleting the stack's objects leaves none behind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from control_plane import ControlPlane
from k8s_cases import (
    GB300_ENCODER_REPLICAS,
    GB300_LOWLAT,
    H200_L3_STATEFULSETS,
    MI355X_AGENTX,
    Case,
    pod_specs,
)
from sim_nodes import add_plain_node, add_pool_nodes, provision_claims
from test_api_server import all_objects, catalog_plan

from flashfleet.k8s import KubernetesPlan, names
from flashfleet.k8s.containers import GPU_RESOURCES
from flashfleet.planning import load_stack

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
# every namespaced kind the stacks render, and what their controllers make of them
OWNED_KINDS = "deployments,statefulsets,daemonsets,jobs,pods,services,endpointslices,persistentvolumeclaims,configmaps,secrets,resourceclaims,resourceclaimtemplates"


@pytest.fixture
def cp(cluster: ControlPlane) -> Iterator[ControlPlane]:
    yield cluster
    cluster.reset()


def bring_up(cp: ControlPlane, plan: KubernetesPlan) -> None:
    provision_claims(cp, list(plan.objects))
    cp.apply(all_objects(plan))
    ns = plan.namespace
    if plan.weights_job:
        cp.wait_for(lambda: (cp.get("job", plan.weights_job, namespace=ns) or {}).get("status", {}).get("succeeded"),
                    what=f"Job {plan.weights_job} complete", namespace=ns)  # fmt: skip
    for name in plan.workloads:
        cp.wait_for(lambda n=name: _available(cp, ns, n), what=f"{name} available", namespace=ns)


def _available(cp: ControlPlane, ns: str, name: str) -> bool:
    obj = cp.get("deployment", name, namespace=ns) or cp.get("statefulset", name, namespace=ns)
    status = (obj or {}).get("status", {})
    want = obj["spec"].get("replicas", 1) if obj else 1
    current = status.get("updatedReplicas", status.get("currentReplicas")) == want
    return (
        bool(obj)
        and current
        and status.get("readyReplicas") == want
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


def _pods(cp: ControlPlane, plan: KubernetesPlan, component: str) -> list[dict[str, Any]]:
    sel = f"{names.LABEL_INSTANCE}={plan.stack},app.kubernetes.io/component={component}"
    return [
        p
        for p in cp.items("pods", namespace=plan.namespace, selector=sel)
        if "deletionTimestamp" not in p["metadata"]
    ]


def _rendered_limits(plan: KubernetesPlan) -> list[dict[str, str]]:
    """Each GPU container's limits as rendered, in the API server's string form."""
    out = []
    for obj in plan.objects:
        if (
            obj["kind"] in WORKLOADS
            and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "serve"
        ):
            for spec in pod_specs(obj):
                for c in [*spec.get("initContainers", []), *spec["containers"]]:
                    limits = c.get("resources", {}).get("limits", {})
                    if any(k in limits for k in GPU_RESOURCES.values()) or c.get("resources", {}).get(
                        "claims"
                    ):
                        out.append({k: str(v) for k, v in limits.items()})
    return sorted(out, key=str)


def _versions(cp: ControlPlane, plan: KubernetesPlan) -> dict[str, str]:
    out = {}
    for obj in all_objects(plan):
        md = obj["metadata"]
        got = cp.get(obj["kind"].lower(), md["name"], namespace=md.get("namespace"))
        out[f"{obj['kind']}/{md['name']}"] = got["metadata"]["resourceVersion"]
    return out


def _assert_placed(cp: ControlPlane, plan: KubernetesPlan, pool_nodes: list[str]) -> None:
    serving = _pods(cp, plan, "serve")
    assert serving
    assert {p["spec"]["nodeName"] for p in serving} <= set(pool_nodes)
    # one server pod a node: the GPUs (and serverResources) of a node hold one
    assert len({p["spec"]["nodeName"] for p in serving}) == len(serving)
    running = [
        {k: str(v) for k, v in c["resources"]["limits"].items()}
        for p in serving
        for c in [*p["spec"].get("initContainers", []), *p["spec"]["containers"]]
        if any(k in c["resources"].get("limits", {}) for k in GPU_RESOURCES.values())
        or c["resources"].get("claims")
    ]
    assert sorted(running, key=str) == _rendered_limits(plan)
    for pod in [*serving, *_pods(cp, plan, "router")]:
        assert pod["spec"]["nodeName"] in pool_nodes, pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running"
    # the pre-pull DaemonSet: exactly the pool's nodes, never the plain one
    ds = cp.get("daemonset", names.pre_pull(plan.stack), namespace=plan.namespace)
    assert ds["status"]["desiredNumberScheduled"] == len(pool_nodes)
    pulled = cp.wait_for(lambda: [p["spec"]["nodeName"] for p in _pods(cp, plan, "prepull")
                                  if p["status"].get("phase") == "Running"] or None, what="pre-pull pods")  # fmt: skip
    assert sorted(pulled) == sorted(pool_nodes)
    # the endpoint Service's endpoints are the pods that answer on it: the router's, or the server's
    front = _pods(cp, plan, "router" if plan.router else "serve")
    want = {
        p["metadata"]["name"] for p in front if p["metadata"]["labels"].get(names.LABEL_ENDPOINT) == "true"
    }
    assert want

    def ready_endpoints() -> set[str] | None:
        sel = f"kubernetes.io/service-name={plan.endpoint_service}"
        got = {
            e["targetRef"]["name"]
            for s in cp.items("endpointslices", namespace=plan.namespace, selector=sel)
            for e in s.get("endpoints") or []
            if e["conditions"].get("ready")
        }
        return got if got == want else None

    cp.wait_for(ready_endpoints, what=f"endpoints of Service {plan.endpoint_service}")


def _assert_gone(cp: ControlPlane, plan: KubernetesPlan) -> None:
    all_objs = list(reversed(all_objects(plan)))
    cp.kubectl("delete", "--wait=true", "--timeout=120s", "-f", "-", stdin=_list(all_objs))
    sel = f"{names.LABEL_INSTANCE}={plan.stack}"
    left = cp.kubectl("get", OWNED_KINDS, "-A", "-l", sel, "-o", "name")
    assert left.strip() == ""
    assert cp.get("namespace", plan.namespace) is None or plan.objects[0]["kind"] != "Namespace"


def _list(objects: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


@pytest.mark.parametrize("stack", ["mi355x-k8s", "mi355x-k8s-replicas"])
def test_a_catalog_stack_is_scheduled_served_and_removed(cp: ControlPlane, stack: str) -> None:
    spec = load_stack(stack).spec
    source = spec.nodes.source
    pool = add_pool_nodes(cp, source, spec.hardware, spec.nodes.count, prefix=f"{stack}-gpu")  # type: ignore[arg-type]
    add_plain_node(cp, "cpu-0")
    plan = catalog_plan(stack)
    bring_up(cp, plan)
    _assert_placed(cp, plan, pool)
    before = _versions(cp, plan)
    cp.apply(all_objects(plan))  # what a second `up` sends: the same objects
    assert _versions(cp, plan) == before
    _assert_gone(cp, plan)


def test_a_pvc_cache_binds_and_the_weights_job_completes_before_the_server(cp: ControlPlane) -> None:
    plan = GB300_LOWLAT.plan()
    claim = next(o for o in plan.objects if o["kind"] == "PersistentVolumeClaim")
    (volume,) = provision_claims(cp, list(plan.objects))
    pool = add_pool_nodes(cp, GB300_LOWLAT.source, "gb300", 1, prefix="gb300")
    bring_up(cp, plan)
    pvc = cp.get("pvc", claim["metadata"]["name"], namespace=plan.namespace)
    assert pvc["status"]["phase"] == "Bound"
    assert pvc["spec"]["volumeName"] == volume
    node = cp.get("node", pool[0])
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "arm64"
    _assert_placed(cp, plan, pool)


def test_shared_gpus_are_allocated_through_dra(cp: ControlPlane) -> None:
    """Encoder disaggregation: the encoder and the language model share the pod's GPUs through
    one ResourceClaim, which the real scheduler allocates from the nodes' ResourceSlices."""
    case: Case = GB300_ENCODER_REPLICAS
    pool = add_pool_nodes(cp, case.source, "gb300", 2, prefix="gb300")
    plan = case.plan()
    bring_up(cp, plan)
    _assert_placed(cp, plan, pool)
    claims = cp.items("resourceclaims", namespace=plan.namespace)
    assert len(claims) == 2
    for claim in claims:
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 4
        assert {r["pool"] for r in results} <= set(pool)


@pytest.mark.parametrize("case", [MI355X_AGENTX, H200_L3_STATEFULSETS], ids=lambda c: c.stack)
def test_an_option_change_rolls_out_where_the_gpus_hold_one_copy(cp: ControlPlane, case: Case) -> None:
    """Each node offers exactly the GPUs one server takes, so a second copy of a pod never fits:
    the Deployment's Recreate strategy, and a one-pod StatefulSet's rolling update (delete, then
    create), replace the pods where a surge would wait forever for a second set of GPUs."""
    gpus = {len(launch.gpus) for launch in case.plan().launches}
    pool = add_pool_nodes(cp, case.source, case.hardware, case.nodes, prefix=case.hardware, gpus=max(gpus))
    plan = case.plan()
    bring_up(cp, plan)
    old = {p["metadata"]["uid"] for p in _pods(cp, plan, "serve")}
    new_plan = replace(case, options={**case.options, "max_running_requests": 64}).plan()
    assert new_plan.objects != plan.objects
    bring_up(cp, new_plan)
    new = {p["metadata"]["uid"] for p in _pods(cp, new_plan, "serve")}
    assert len(new) == len(old) == case.nodes
    assert not new & old
    _assert_placed(cp, new_plan, pool)


def test_a_pod_that_cannot_fit_stays_pending_with_the_schedulers_reason(cp: ControlPlane) -> None:
    spec = load_stack("mi355x-k8s").spec
    add_pool_nodes(cp, spec.nodes.source, "mi355x", 1, prefix="mi355x", gpus=2)  # type: ignore[arg-type]
    plan = catalog_plan("mi355x-k8s")
    cp.apply(all_objects(plan))

    def unschedulable() -> str | None:
        for pod in _pods(cp, plan, "serve"):
            for c in pod["status"].get("conditions", []):
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return str(c["message"])
        return None

    message = cp.wait_for(unschedulable, what="the server pod refused by the scheduler")
    assert "Insufficient amd.com/gpu" in message
