"""KubernetesCluster under Pulumi mocks: what pulumi-kubernetes would be asked to create."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from k8s_cases import GB300_2P1D, GB300_LOWLAT, GB300_PD, H200_L3, H200_REPLICAS, MI355X_AGENTX, Case, source
from pulumi.runtime import rpc

from flashfleet.components.kubernetes import KubernetesCluster, KubernetesClusterArgs, kubernetes_provider
from flashfleet.k8s import names

TOKEN = "hf_k8sTOKENthatMUSTneverLEAK0123456789"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SECRET = "kubernetes:core/v1:Secret"


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    provider: str | None


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[Registered] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), args.provider))
        out = dict(args.inputs)
        if args.typ == "kubernetes:core/v1:Service":
            out["status"] = {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}
        return f"{args.name}-id", out

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        raise AssertionError(f"unexpected invoke {args.token}")

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]


@dataclass
class Deployed:
    cluster: KubernetesCluster
    mocks: Recorder
    outputs: dict[str, Any]


def deploy(case: Case, *, token: str | None = TOKEN, with_provider: bool = False) -> Deployed:
    mocks = Recorder()
    pulumi.runtime.set_mocks(mocks, project="flashfleet", stack=case.stack, preview=False)
    holder: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        provider = k8s.Provider("ctx", context="gpu-cluster") if with_provider else None
        cluster = KubernetesCluster(
            case.stack,
            KubernetesClusterArgs(
                source=case.source,
                hardware=case.hardware,
                nodes=case.nodes,
                recipe_for=case.recipe_for,
                launch_settings=case.settings(),
                mooncake=case.mooncake,
                hf_token=pulumi.Output.secret(token) if token else None,
            ),
            opts=pulumi.ResourceOptions(provider=provider),
        )
        holder["cluster"] = cluster

        async def collect() -> None:
            holder["outputs"] = {
                "endpoint": await cluster.endpoint.future(),
                "namespace": await cluster.namespace.future(),
                "workloads": await cluster.workloads.future(),
            }

        return asyncio.ensure_future(collect())

    program()
    return Deployed(holder["cluster"], mocks, holder["outputs"])


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _plain_strings(value: Any) -> list[str]:
    """Every string in value that is not inside a secret."""
    if _is_secret(value):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_plain_strings(k), *_plain_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _plain_strings(v)]
    return []


def _pod(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def _serve(d: Deployed) -> Registered:
    (serve,) = [r for r in d.mocks.of_type(DEPLOYMENT) if r.inputs["metadata"]["name"].endswith("-serve")]
    return serve


MI355X_REPO = "OneNexus/GLM-5.3-Flash-MXFP4"
CASES = [GB300_LOWLAT, MI355X_AGENTX, GB300_PD, H200_L3]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.stack)
def test_token_only_inside_a_secret(case: Case) -> None:
    d = deploy(case)
    leaks = [
        f"{r.typ}::{r.name}" for r in d.mocks.resources if any(TOKEN in s for s in _plain_strings(r.inputs))
    ]
    assert leaks == []
    (secret,) = d.mocks.of_type(SECRET)
    assert secret.inputs["metadata"] == {
        "name": f"{case.stack}-hf-token",
        "namespace": "glm",
        "labels": names.labels(case.stack, "token"),  # what `down` and sweeping find it by
    }
    assert _is_secret(secret.inputs["stringData"])
    assert secret.inputs["stringData"]["value"] == {"HF_TOKEN": TOKEN}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.stack)
def test_each_container_command_is_the_launch_argv(case: Case) -> None:
    d = deploy(case)
    plan = d.cluster.plan
    registered: dict[str, list[str]] = {}
    for r in d.mocks.resources:
        if r.typ in (DEPLOYMENT, "kubernetes:apps/v1:StatefulSet"):
            pod = _pod(r.inputs)
            for c in [*pod.get("initContainers", []), *pod["containers"]]:
                registered[c["name"]] = c["command"]
        if r.typ == "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet":
            leader = r.inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
            registered[leader["name"]] = leader["command"]
    for launch in plan.launches:
        if launch.node == 0:
            assert registered[launch.name] == list(launch.argv), launch.name


def test_gb300_low_latency_resources() -> None:
    d = deploy(GB300_LOWLAT)
    kinds = Counter(r.typ for r in d.mocks.resources)
    assert kinds == Counter(
        {
            "flashfleet:nodes:KubernetesCluster": 1,
            "kubernetes:core/v1:Namespace": 1,
            "kubernetes:core/v1:PersistentVolumeClaim": 1,
            "kubernetes:core/v1:ConfigMap": 1,  # the weights download program
            "kubernetes:batch/v1:Job": 1,
            "kubernetes:apps/v1:DaemonSet": 1,
            DEPLOYMENT: 1,
            "kubernetes:core/v1:Service": 1,
            SECRET: 1,
        }
    )
    names = [r.name for r in d.mocks.resources]
    assert len(names) == len(set(names))  # mocks do not catch duplicate URNs
    pod = _pod(_serve(d).inputs)
    (server,) = pod["containers"]
    assert server["resources"]["limits"] == {"cpu": "128", "memory": "800Gi", "nvidia.com/gpu": 4}
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p6e-gb300.36xlarge"}
    assert server["readinessProbe"]["httpGet"] == {"path": "/health", "port": 30000}
    assert server["startupProbe"]["failureThreshold"] * server["startupProbe"]["periodSeconds"] >= 3600
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(volumes) == {"dshm", "model-cache", "hf-token"}
    assert volumes["hf-token"]["secret"]["secretName"] == "gb300-lowlat-hf-token"
    env = {e["name"]: e for e in server["env"]}
    assert "HF_TOKEN" not in env
    assert env["HF_TOKEN_PATH"] == {"name": "HF_TOKEN_PATH", "value": "/etc/flashfleet/hf-token/HF_TOKEN"}
    assert d.outputs == {
        "endpoint": "http://gb300-lowlat.glm.svc:30000/v1",
        "namespace": "glm",
        "workloads": ["gb300-lowlat-serve"],
    }


def test_mi355x_agentx_resources() -> None:
    d = deploy(MI355X_AGENTX)
    pod = _pod(_serve(d).inputs)
    (server,) = pod["containers"]
    assert server["resources"]["limits"] == {"cpu": "96", "memory": "1200Gi", "amd.com/gpu": 4}
    assert server["securityContext"] == {"seccompProfile": {"type": "Unconfined"}}
    assert pod["nodeSelector"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI355X"}
    assert pod["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "16Gi"
    # the client install, then the download, each by the hosts' download program
    assert [json.loads(c["command"][3])["repos"] for c in pod["initContainers"]] == [[], [MI355X_REPO]]
    assert d.mocks.of_type("kubernetes:batch/v1:Job") == []


def test_pd_resources() -> None:
    d = deploy(GB300_PD)
    pod = _pod(_serve(d).inputs)
    limits = {c["name"]: c["resources"]["limits"] for c in [*pod["initContainers"], *pod["containers"]]}
    half = {"cpu": "64", "memory": "400Gi", "nvidia.com/gpu": 2}
    assert limits == {"prefill": half, "decode": half, "router": {"cpu": "8", "memory": "8Gi"}}
    assert d.outputs["workloads"] == ["gb300-pd-serve"]


def test_l3_mooncake_objects() -> None:
    d = deploy(H200_L3)
    by_type = Counter(r.typ for r in d.mocks.resources)
    assert by_type["kubernetes:core/v1:ConfigMap"] == 2  # Mooncake's config, the download program
    assert by_type["kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"] == 1
    (master,) = d.mocks.of_type(DEPLOYMENT)
    assert _pod(master.inputs)["containers"][0]["command"][0] == "mooncake_master"
    services = {r.inputs["metadata"]["name"] for r in d.mocks.of_type("kubernetes:core/v1:Service")}
    assert services == {"h200-l3", "h200-l3-mooncake"}
    (policy,) = d.mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert (
        policy.inputs["spec"]["podSelector"]["matchLabels"]
        == master.inputs["spec"]["selector"]["matchLabels"]
    )
    (config_map,) = [
        r
        for r in d.mocks.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"]["name"] == "h200-l3-mooncake-config"
    ]
    assert (
        '"master_server_address": "h200-l3-mooncake.glm.svc:50051"'
        in config_map.inputs["data"]["mooncake.json"]
    )


def _record_depends(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """What each object the component creates depends on, as ``Kind/name`` keys."""
    depends: dict[str, list[str]] = {}
    create = KubernetesCluster._create

    def recording(
        self: KubernetesCluster, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> Any:
        made = {id(r): key for key, r in self.resources.items()}
        depends[f"{obj['kind']}/{obj['metadata']['name']}"] = [
            made[id(d)] for d in (opts.depends_on or []) if id(d) in made
        ]
        return create(self, name, obj, opts)

    monkeypatch.setattr(KubernetesCluster, "_create", recording)
    return depends


@pytest.mark.parametrize("case", [GB300_LOWLAT, MI355X_AGENTX], ids=["ReadWriteMany Job", "hostPath init"])
def test_the_pre_pull_starts_with_the_download_and_nothing_waits_for_it(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    depends = _record_depends(monkeypatch)
    d = deploy(case)
    (ds,) = d.mocks.of_type("kubernetes:apps/v1:DaemonSet")
    # `up` does not wait for every pool node to pull: the servers wait for what they need
    assert ds.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    prepull = f"DaemonSet/{ds.inputs['metadata']['name']}"
    assert all(dep.startswith("Namespace/") for dep in depends[prepull])  # not after the Job
    assert all(prepull not in deps for deps in depends.values())
    serve = f"Deployment/{case.stack}-serve"
    jobs = [key for key in depends if key.startswith("Job/")]
    assert [dep for dep in depends[serve] if dep.startswith("Job/")] == jobs  # the Job still first
    # torn down with the stack: a child of the component, labelled as flashfleet's
    assert ds.inputs["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "flashfleet"
    assert ds.inputs["metadata"]["labels"]["app.kubernetes.io/instance"] == case.stack
    assert d.cluster.resources[prepull] is not None


def test_no_token_no_secret() -> None:
    d = deploy(GB300_LOWLAT, token=None)
    assert d.mocks.of_type(SECRET) == []


def test_provider_from_opts_reaches_every_child() -> None:
    d = deploy(GB300_LOWLAT, with_provider=True)
    children = [r for r in d.mocks.resources if r.typ.startswith("kubernetes:")]
    assert children
    assert all(r.provider is not None and "::ctx::" in r.provider for r in children)


def test_load_balancer_endpoint() -> None:
    lb = source(serviceType="LoadBalancer", loadBalancerSourceRanges=["203.0.113.0/24"])
    d = deploy(Case("gb300-lb", "gb300", "low-latency", source=lb))
    assert d.outputs["endpoint"] == "http://lb.example.com:30000/v1"
    (svc,) = [s for s in d.mocks.of_type("kubernetes:core/v1:Service") if s.name.endswith("-gb300-lb")]
    assert svc.inputs["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


def test_provider_helper_uses_the_context() -> None:
    assert kubernetes_provider("x", source()) is None


def test_a_cluster_starts_its_router_after_every_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    depends = _record_depends(monkeypatch)
    d = deploy(GB300_2P1D)
    v = d.cluster.plan.pd_version
    instances = [f"Deployment/gb300-2p1d-{i}-{v}" for i in ("prefill-0", "prefill-1", "decode-0")]
    router, endpoint = "Deployment/gb300-2p1d-router", "Service/gb300-2p1d"
    (job,) = [key for key in depends if key.startswith("Job/")]  # a ReadWriteMany cache: one download
    for instance in instances:
        assert job in depends[instance]  # the weights first
        assert router not in depends[instance]
        assert f"Service/{instance.split('/')[1]}" in d.cluster.resources
    # Pulumi awaits each instance's Deployment, so the router lists workers that serve.
    assert [dep for dep in depends[router] if dep in instances] == instances
    assert job not in depends[router]  # the router loads no weights (it waits through the instances)
    assert router in depends[endpoint]
    assert d.outputs["workloads"] == [key.split("/")[1] for key in instances] + ["gb300-2p1d-router"]
    assert d.outputs["endpoint"] == "http://gb300-2p1d.glm.svc:30000/v1"
    assert Counter(r.typ for r in d.mocks.resources)[DEPLOYMENT] == 4


def test_a_pd_groups_objects_are_replaced_old_first_under_names_without_the_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new PD version renames every instance's objects: Pulumi must see a replacement of the
    same resource (its name without the version), with the old object deleted first, so the GPUs
    are free and no old and new group serve side by side. The router is updated in place."""
    seen: dict[str, tuple[str, bool | None]] = {}
    create = KubernetesCluster._create

    def recording(
        self: KubernetesCluster, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> Any:
        made = create(self, name, obj, opts)
        seen[f"{obj['kind']}/{obj['metadata']['name']}"] = (made._name, opts.delete_before_replace)
        return made

    monkeypatch.setattr(KubernetesCluster, "_create", recording)
    d = deploy(GB300_2P1D)
    v = d.cluster.plan.pd_version
    for kind in ("Deployment", "Service"):
        for instance in ("prefill-0", "prefill-1", "decode-0"):
            logical, first = seen[f"{kind}/gb300-2p1d-{instance}-{v}"]
            assert (logical, first) == (f"gb300-2p1d-{kind.lower()}-gb300-2p1d-{instance}", True)
    assert seen["Deployment/gb300-2p1d-router"] == ("gb300-2p1d-deployment-gb300-2p1d-router", None)
    replicas = deploy(H200_REPLICAS)
    assert replicas.cluster.plan.pd_version is None


def test_gang_scheduling_creates_each_sets_podgroup_before_the_set() -> None:
    """The PodGroup goes through the provider's generic resource, as rendered (the typed SDK of
    the pinned provider predates the Workload API)."""
    import dataclasses

    from k8s_cases import MI355X_LWS

    d = deploy(dataclasses.replace(MI355X_LWS, source=source(leaderWorkerSet=True, gangScheduling=True)))
    (group,) = d.mocks.of_type("kubernetes:scheduling.k8s.io/v1alpha2:PodGroup")
    (lws,) = d.mocks.of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert group.inputs["metadata"]["name"] == lws.inputs["metadata"]["name"] == "mi355x-x2-serve"
    assert group.inputs["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    order = [r.typ for r in d.mocks.resources]
    assert order.index(group.typ) < order.index(lws.typ)
