"""A Kubernetes stack through the program: the cluster component, its outputs, and the HF token
reaching the cluster only as a Secret (no inventory, no Ansible hand-off)."""

from __future__ import annotations

import pytest
from pulumi_harness import TOKEN, Result, is_secret, run_program, token_leaks

from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack import KubernetesSource, list_stacks

K8S_STACKS = [s for s in list_stacks() if load_stack(s).spec.nodes.source.kind == "kubernetes"]
CLUSTER = "flashfleet:nodes:KubernetesCluster"
SECRET = "kubernetes:core/v1:Secret"
_cache: dict[str, Result] = {}


def program(stack: str) -> Result:
    if stack not in _cache:
        _cache[stack] = run_program(stack)
    return _cache[stack]


def test_the_catalog_has_a_kubernetes_stack() -> None:
    assert K8S_STACKS == ["mi355x-k8s", "mi355x-k8s-replicas"]


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_registers_the_cluster_and_every_rendered_object(stack: str) -> None:
    r = program(stack)
    src = r.bringup.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    (cluster,) = r.mocks.of_type(CLUSTER)
    assert cluster.name == stack
    assert not [x for x in r.mocks.resources if x.typ.startswith("aws:") or "ExistingHosts" in x.typ]
    plan = kubernetes_plan(stack, r.bringup.spec)
    objects = [x for x in r.mocks.resources if x.typ.startswith("kubernetes:")]
    registered = sorted((x.typ.rsplit(":", 1)[1], x.inputs["metadata"]["name"]) for x in objects)
    rendered = [(o["kind"], o["metadata"]["name"]) for o in plan.objects] + [("Secret", plan.secret_name)]
    assert registered == sorted(rendered)
    # The stack's kubeconfig context is the provider of every Kubernetes object.
    (provider,) = r.mocks.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == src.context
    assert all(x.provider and f"::{provider.name}::" in x.provider for x in objects)


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_exports_endpoint_namespace_and_workloads_only(stack: str) -> None:
    r = program(stack)
    plan = kubernetes_plan(stack, r.bringup.spec)
    assert set(r.outputs) == {"endpoint", "namespace", "workloads", "expiresAt"}
    ns = {"mi355x-k8s": "glm", "mi355x-k8s-replicas": "glm-replicas"}[stack]  # each its own namespace
    assert r.outputs["endpoint"] == plan.endpoint == f"http://{stack}.{ns}.svc:30000/v1"
    assert r.outputs["namespace"] == ns
    single = [f"{stack}-serve"]
    cluster = [f"{stack}-replica-0", f"{stack}-replica-1", f"{stack}-router"]
    assert r.outputs["workloads"] == list(plan.workloads) == (cluster if r.bringup.spec.cluster else single)
    assert r.outputs["expiresAt"] == "2026-11-29T18:00:00Z"


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_hf_token_only_inside_the_secret(stack: str) -> None:
    r = program(stack)
    assert token_leaks(r.mocks, r.outputs, r.secret, TOKEN) == []
    assert not any(r.secret.values()), "no output carries the token"
    (secret,) = r.mocks.of_type(SECRET)
    assert is_secret(secret.inputs["stringData"])
    assert secret.inputs["stringData"]["value"] == {"HF_TOKEN": TOKEN}
    deployments = [x for x in r.mocks.resources if x.typ == "kubernetes:apps/v1:Deployment"]
    serving = [
        d for d in deployments if d.inputs["metadata"]["labels"]["app.kubernetes.io/component"] == "serve"
    ]
    assert len(serving) == (r.bringup.spec.cluster.instances if r.bringup.spec.cluster else 1)
    for serve in serving:
        pod = serve.inputs["spec"]["template"]["spec"]
        (server,) = pod["containers"]
        # The server reads the Secret as a file (HF_TOKEN_PATH), never as an environment value.
        env = {e["name"]: e for e in server["env"]}
        assert "HF_TOKEN" not in env
        (volume,) = [v for v in pod["volumes"] if "secret" in v]
        assert volume["secret"]["secretName"] == secret.inputs["metadata"]["name"]
        (mount,) = [m for m in server["volumeMounts"] if m["name"] == volume["name"]]
        assert mount["readOnly"] is True
        assert env["HF_TOKEN_PATH"]["value"] == f"{mount['mountPath']}/HF_TOKEN"
    for router in [d for d in deployments if d not in serving]:  # a cluster's router: no Secret at all
        pod = router.inputs["spec"]["template"]["spec"]
        assert not [v for v in pod["volumes"] if "secret" in v]
        assert all(not c.get("env") for c in pod["containers"])


def test_a_cluster_registers_each_instance_and_its_router() -> None:
    stack = "mi355x-k8s-replicas"
    r = program(stack)
    kinds = {
        (x.typ.rsplit(":", 1)[1], x.inputs["metadata"]["name"])
        for x in r.mocks.resources
        if x.typ.startswith("kubernetes:")
    }
    for instance in ("replica-0", "replica-1"):
        assert {("Deployment", f"{stack}-{instance}"), ("Service", f"{stack}-{instance}")} <= kinds
    assert {("Deployment", f"{stack}-router"), ("Service", stack)} <= kinds
    assert ("Deployment", f"{stack}-serve") not in kinds
    (endpoint,) = [
        x for x in r.mocks.of_type("kubernetes:core/v1:Service") if x.inputs["metadata"]["name"] == stack
    ]
    (router,) = [
        x
        for x in r.mocks.of_type("kubernetes:apps/v1:Deployment")
        if x.inputs["metadata"]["name"] == f"{stack}-router"
    ]
    labels = router.inputs["spec"]["template"]["metadata"]["labels"]
    assert endpoint.inputs["spec"]["selector"].items() <= labels.items()


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_no_token_no_secret(stack: str) -> None:
    r = run_program(stack, token=None)
    assert r.mocks.of_type(SECRET) == []
    assert len(r.mocks.of_type(CLUSTER)) == 1
