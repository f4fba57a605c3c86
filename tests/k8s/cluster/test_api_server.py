"""Every Kubernetes stack's objects, as the component renders them, put to a real API server.

A JSON-schema check accepts much that the API server refuses (names, label values, immutable
fields, selectors that miss their template, CEL rules of the LeaderWorkerSet CRD). Here each
stack's objects go through the real admission and validation: a server-side dry run, under the
field manager the provider uses, after the namespace exists (a dry run cannot create one).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from control_plane import ControlPlane, KubectlError
from k8s_cases import ALL, H200_L3_STATEFULSETS, POOLS, Case, source
from k8s_schema import validate
from pydantic import ValidationError

from flashfleet.k8s import KubernetesPlan
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack.files import list_stacks

CATALOG = tuple(n for n in list_stacks() if load_stack(n).spec.nodes.source.kind == "kubernetes")


@pytest.fixture(autouse=True, scope="module")
def _the_cluster_left_empty(cluster: ControlPlane) -> Iterator[None]:
    """The namespaces these tests create for real (a dry run cannot create one) carry the stack's
    created-by mark: left behind, the next module's `up` of another stack would be refused it."""
    yield
    cluster.reset()


def catalog_plan(stack: str) -> KubernetesPlan:
    return kubernetes_plan(stack, load_stack(stack).spec)


def all_objects(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """The stack's objects with the token Secret the component adds, in apply order."""
    objects = list(plan.objects)
    at = 1 if objects and objects[0]["kind"] == "Namespace" else 0
    return [*objects[:at], plan.token_secret("hf_not_a_real_token"), *objects[at:]]


def ensure_namespace(cp: ControlPlane, plan: KubernetesPlan) -> list[dict[str, Any]]:
    """Creates the stack's namespace (its own object where it renders one); returns the rest."""
    objects = all_objects(plan)
    if objects[0]["kind"] == "Namespace":
        cp.apply(objects[:1])
        return objects[1:]
    if cp.get("namespace", plan.namespace) is None:
        cp.kubectl("create", "namespace", plan.namespace)
    return objects


def test_the_catalog_has_kubernetes_stacks() -> None:
    assert {"mi355x-k8s", "mi355x-k8s-replicas"} <= set(CATALOG)


@pytest.mark.parametrize("stack", CATALOG)
def test_the_api_server_accepts_every_catalog_stack(cluster: ControlPlane, stack: str) -> None:
    plan = catalog_plan(stack)
    out = cluster.apply(ensure_namespace(cluster, plan), dry_run=True)
    assert out.count("serverside-applied (server dry run)") == len(all_objects(plan)) - 1, out


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.stack)
def test_the_api_server_accepts_every_rendered_case(cluster: ControlPlane, case: Case) -> None:
    plan = case.plan()
    rest = ensure_namespace(cluster, plan)
    out = cluster.apply(rest, dry_run=True)
    assert out.count("serverside-applied (server dry run)") == len(rest), out


def test_the_api_server_refuses_what_a_schema_check_accepts(cluster: ControlPlane) -> None:
    """The oracle's own sharpness: an object every JSON schema takes, which the server refuses."""
    plan = catalog_plan("mi355x-k8s")
    rest = ensure_namespace(cluster, plan)
    deployment = next(o for o in rest if o["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "selector": {"matchLabels": {"no": "match"}}}}
    with pytest.raises(KubectlError, match=r"selector.*does not match template"):
        cluster.apply([broken], dry_run=True)


def test_an_rdma_resource_the_schema_takes_and_the_server_refuses_is_refused_offline(
    cluster: ControlPlane,
) -> None:
    """A device-plugin resource named with the quota prefix: every JSON schema takes the objects,
    the API server refuses them, and flashfleet refuses the stack first."""
    resource = "requests.example.com/efa"
    pools = {**POOLS, "h200": {**POOLS["h200"], "rdmaResources": {resource: 1}}}
    with pytest.raises(ValidationError, match="is not an extended resource name"):
        source(nodePools=pools)
    # past flashfleet's check (the pool built unvalidated), what the server would have been sent
    ok = source()
    pool = ok.node_pools["h200"].model_copy(update={"rdma_resources": {resource: 1}})
    case = replace(
        H200_L3_STATEFULSETS, source=ok.model_copy(update={"node_pools": {**ok.node_pools, "h200": pool}})
    )
    plan = case.plan()
    for obj in plan.objects:
        validate(obj)
    with pytest.raises(KubectlError, match="doesn't follow extended resource name standard"):
        cluster.apply(ensure_namespace(cluster, plan), dry_run=True)


def _helper_pods(plan: KubernetesPlan) -> list[tuple[str, dict[str, Any]]]:
    """Each pod template that holds no GPU (downloads, router, Mooncake master, pre-pull)."""
    out = []
    for obj in plan.objects:
        template = obj.get("spec", {}).get("template")
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job", "DaemonSet") or template is None:
            continue
        every = [*template["spec"].get("initContainers", []), *template["spec"]["containers"]]
        resources = [c.get("resources", {}) for c in every]
        if any(r.get("claims") or any(k.endswith("/gpu") for k in r.get("limits", {})) for r in resources):
            continue  # a GPU server: root, with its devices (docs/security.md)
        out.append((f"{obj['kind']}/{obj['metadata']['name']}", template["spec"]))
    return out


def _create_pod(cp: ControlPlane, namespace: str, spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The pod created as far as admission and validation go (a server dry run)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper", "namespace": namespace}}
    return subprocess.run(
        cp._kubectl_argv("create", "--dry-run=server", "-o", "json", "-f", "-"),
        input=json.dumps({**pod, "spec": spec}), capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_api_server_holds_the_helper_pods_security_context_and_admits_them(cluster: ControlPlane) -> None:
    """Every helper pod of every rendered case, created (admission included) in namespaces that
    enforce the Pod Security Standards. Under `restricted` the pre-pull pods are admitted, and
    the others break it by runAsNonRoot alone (the downloads run as root to write a root-owned
    cache; the router and the Mooncake master run as their image's user, which the image does not
    declare non-root). Under `baseline` each is admitted, and the API server holds each
    container's context as rendered."""
    for level in ("restricted", "baseline"):
        cluster.kubectl("create", "namespace", f"psa-{level}")
        cluster.kubectl("label", "namespace", f"psa-{level}", f"pod-security.kubernetes.io/enforce={level}")
    kinds: set[str] = set()
    try:
        for case in ALL:
            for where, spec in _helper_pods(case.plan()):
                what = f"{case.stack}: {where}"
                non_root = all(c.get("securityContext", {}).get("runAsNonRoot") for c in spec["containers"])
                strict = _create_pod(cluster, "psa-restricted", spec)
                if non_root:
                    assert strict.returncode == 0, f"{what}: {strict.stderr}"
                else:
                    assert strict.returncode != 0, f"{what}: admitted under restricted"
                    broken = strict.stderr.split('violates PodSecurity "restricted:latest": ', 1)[-1]
                    assert broken.startswith("runAsNonRoot != true"), f"{what}: {strict.stderr}"
                    assert ";" not in broken, f"{what}: {broken}"  # and nothing else
                held = _create_pod(cluster, "psa-baseline", spec)
                assert held.returncode == 0, f"{what}: {held.stderr}"
                pod = json.loads(held.stdout)["spec"]
                for c in [*pod.get("initContainers", []), *pod["containers"]]:
                    ctx = c.get("securityContext", {})
                    assert ctx.get("allowPrivilegeEscalation") is False, f"{what} {c['name']}"
                    assert ctx.get("capabilities") == {"drop": ["ALL"]}, f"{what} {c['name']}"
                    assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, f"{what} {c['name']}"
                kinds.add(where.split("/")[0])
    finally:
        for level in ("restricted", "baseline"):
            cluster.kubectl("delete", "namespace", f"psa-{level}", "--wait=false")
    assert kinds == {"DaemonSet", "Job", "Deployment"}, kinds  # pre-pull, downloads, router and master
