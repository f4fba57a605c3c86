"""Clusters on the Kubernetes source: one workload per instance, each reachable by a stable DNS
name the router lists, and the router in a pod of its own behind the stack's endpoint Service.
(Every object's schema: test_k8s_schema.py, which renders these cases too.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_cases import CLUSTERS, GB300_2P1D, H200_REPLICAS, H200_REPLICAS_LWS, Case, containers, pod_specs
from k8s_schema import validate

from flashfleet.k8s import KubernetesRenderError, names
from flashfleet.k8s.workloads import LWS_WORKER_INDEX
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.files import stack_path

POD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")


def _ids(case: Case) -> str:
    return case.stack


def _instances(case: Case) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in case.recipe_for(None).processes:
        if p.instance != "router" and p.node not in out.setdefault(p.instance, []):
            out[p.instance].append(p.node)
    return out


def _templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template (metadata and spec) a workload carries."""
    if obj["kind"] == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"], lwt["workerTemplate"]]
    return [obj["spec"]["template"]]


def _selected(objects: list[dict[str, Any]], selector: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(workload, pod template) of every template whose labels carry the whole selector."""
    return [
        (obj["metadata"]["name"], t)
        for obj in objects
        if obj["kind"] in POD_KINDS
        for t in _templates(obj)
        if selector.items() <= t["metadata"]["labels"].items()
    ]


def _router_urls(argv: list[str]) -> list[str]:
    if "--worker-urls" in argv:
        return argv[argv.index("--worker-urls") + 1 : argv.index("--policy")]
    return [argv[i + 1] for i, w in enumerate(argv) if w in ("--prefill", "--decode")]


@pytest.mark.parametrize("case", CLUSTERS, ids=_ids)
def test_one_workload_per_instance_then_the_router(case: Case) -> None:
    plan = case.plan()
    instances = _instances(case)
    assert len(instances) >= 2
    expected = [names.instance_name(case.stack, i, plan.pd_version) for i in instances]
    assert list(plan.workloads) == [*expected, f"{case.stack}-router"]
    assert plan.router == f"{case.stack}-router"
    workloads = {o["metadata"]["name"]: o for o in plan.objects if o["kind"] in POD_KINDS}
    assert set(workloads) == set(plan.workloads)  # no single-instance `<stack>-serve` beside them
    for instance, nodes in instances.items():
        obj = workloads[names.instance_name(case.stack, instance, plan.pd_version)]
        assert obj["kind"] == ("Deployment" if len(nodes) == 1 else "LeaderWorkerSet")
        assert obj["metadata"]["labels"][names.LABEL_CLUSTER_INSTANCE] == instance
        for t in _templates(obj):
            assert t["metadata"]["labels"][names.LABEL_CLUSTER_INSTANCE] == instance
        if obj["kind"] == "LeaderWorkerSet":
            assert obj["spec"]["leaderWorkerTemplate"]["size"] == len(nodes)
    assert workloads[plan.router]["kind"] == "Deployment"
    # Every launch runs in exactly one template (LWS: ranks 1.. share the worker template).
    launched = {launch.name for launch in plan.launches}
    by_template = [
        n for o in workloads.values() for pod in pod_specs(o) for n in containers(pod) if n in launched
    ]
    assert len(by_template) == len(set(by_template))
    ranks_above_1 = {launch.name for launch in plan.launches if launch.rank > 1}
    assert set(by_template) == launched - ranks_above_1


@pytest.mark.parametrize("case", CLUSTERS, ids=_ids)
def test_every_selector_matches_its_own_templates_only(case: Case) -> None:
    plan = case.plan()
    objects = list(plan.objects)
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet"):
            selected = _selected(objects, obj["spec"]["selector"]["matchLabels"])
            assert selected == [(obj["metadata"]["name"], obj["spec"]["template"])], obj["metadata"]["name"]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for instance, nodes in _instances(case).items():
        name = names.instance_name(case.stack, instance, plan.pd_version)
        if len(nodes) > 1:
            assert name not in services  # the LWS controller's headless Service has that name
            continue
        svc = services[name]
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["publishNotReadyAddresses"] is True
        ((workload, _),) = _selected(objects, svc["spec"]["selector"])
        assert workload == name
    endpoint = services[plan.endpoint_service]
    ((workload, template),) = _selected(objects, endpoint["spec"]["selector"])
    assert workload == plan.router
    (router,) = template["spec"]["containers"]
    assert router["name"] == "router"
    assert endpoint["spec"]["ports"][0]["port"] == router["ports"][0]["containerPort"] == 30000
    assert plan.endpoint == f"http://{case.stack}.glm.svc:30000/v1"


@pytest.mark.parametrize("case", CLUSTERS, ids=_ids)
def test_the_router_names_every_instance_by_its_stable_dns_name_and_port(case: Case) -> None:
    plan = case.plan()
    objects = {(o["kind"], o["metadata"]["name"]): o for o in plan.objects}
    (router,) = [launch for launch in plan.launches if launch.name == "router"]
    urls = _router_urls(list(router.argv))
    instances = _instances(case)
    assert len(urls) == len(instances)
    for url, (instance, nodes) in zip(urls, instances.items(), strict=True):
        name = names.instance_name(case.stack, instance, plan.pd_version)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        if len(nodes) == 1:
            assert host == f"{name}.glm"
            svc = objects[("Service", name)]
            assert int(port) in [p["port"] for p in svc["spec"]["ports"]]
            (template,) = _templates(objects[("Deployment", name)])
        else:
            assert host == f"{name}-0.{name}.glm"  # the leader pod, by the LWS headless Service
            template = _templates(objects[("LeaderWorkerSet", name)])[0]
        # The pod behind that name listens on the port the router calls.
        listening = [p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])]
        assert int(port) in listening, (url, listening)


def test_a_prefill_service_carries_its_bootstrap_port() -> None:
    plan = GB300_2P1D.plan()
    v = plan.pd_version
    argv = list(next(launch for launch in plan.launches if launch.name == "router").argv)
    pairs = [argv[i + 1 : i + 3] for i, w in enumerate(argv) if w == "--prefill"]
    assert pairs == [
        [f"http://gb300-2p1d-prefill-0-{v}.glm:31000", "8998"],
        [f"http://gb300-2p1d-prefill-1-{v}.glm:31000", "8998"],
    ]
    assert [argv[i + 1] for i, w in enumerate(argv) if w == "--decode"] == [
        f"http://gb300-2p1d-decode-0-{v}.glm:32000"
    ]
    services = {o["metadata"]["name"]: o for o in plan.objects if o["kind"] == "Service"}
    for name, ports in (("prefill-0", [31000, 8998]), ("prefill-1", [31000, 8998]), ("decode-0", [32000])):
        assert [p["port"] for p in services[f"gb300-2p1d-{name}-{v}"]["spec"]["ports"]] == ports


def test_a_pd_groups_version_renames_every_instance_when_any_server_changes() -> None:
    """What a prefill and a decode must share is in the group's version: a change to one
    server's options renames every PD instance and the router's argv follows; a change of the
    router's own options leaves the group as it is. Replicas have no version."""
    plan = GB300_2P1D.plan()
    assert plan.pd_version is not None
    assert len(plan.pd_version) == 6
    changed = dataclasses.replace(GB300_2P1D, options={**GB300_2P1D.options, "max_running_requests": 64})
    other = changed.plan()
    assert other.pd_version not in (None, plan.pd_version)
    assert not set(plan.workloads[:-1]) & set(other.workloads[:-1])
    assert plan.router == other.router  # one router, updated in place to name the new group
    router = next(o for o in other.objects if o["metadata"]["name"] == other.router)
    labels = router["spec"]["template"]["metadata"]["labels"]
    assert labels[names.LABEL_PD_VERSION] == other.pd_version
    argv = " ".join(next(launch for launch in other.launches if launch.name == "router").argv)
    assert plan.pd_version not in argv
    assert argv.count(f"-{other.pd_version}.glm") == 3
    for obj in other.objects:
        if obj["kind"] == "Service" and obj["metadata"]["name"] != other.endpoint_service:
            assert obj["spec"]["selector"][names.LABEL_PD_VERSION] == other.pd_version
    assert H200_REPLICAS.plan().pd_version is None


@pytest.mark.parametrize("case", CLUSTERS, ids=_ids)
def test_the_router_pod_takes_no_gpu_no_model_cache_no_token(case: Case) -> None:
    plan = case.plan()
    (deployment,) = [o for o in plan.objects if o["metadata"]["name"] == plan.router]
    assert deployment["metadata"]["labels"][names.LABEL_COMPONENT] == "router"
    pod = deployment["spec"]["template"]["spec"]
    assert "initContainers" not in pod  # no weight download
    assert "resourceClaims" not in pod
    assert [v["name"] for v in pod["volumes"]] == ["dshm"]  # no cache, no Secret
    (c,) = pod["containers"]
    assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert c["env"] == []
    assert set(c["resources"]["limits"]) == {"cpu", "memory"}
    assert "claims" not in c["resources"]
    # Placed with the stack's pods, where the image was pre-pulled.
    (prepull,) = [o for o in plan.objects if o["kind"] == "DaemonSet"]
    assert pod["nodeSelector"] == prepull["spec"]["template"]["spec"]["nodeSelector"]
    # The instances' pods, by contrast, carry the cache and the token and are not the endpoint.
    for obj in plan.objects:
        if obj["kind"] in POD_KINDS and obj["metadata"]["name"] != plan.router:
            for t in _templates(obj):
                assert names.LABEL_ENDPOINT not in t["metadata"]["labels"]
                assert "model-cache" in [v["name"] for v in t["spec"]["volumes"]]


def test_a_multi_node_instance_rendezvouses_on_its_own_leader() -> None:
    plan = H200_REPLICAS_LWS.plan()
    for instance in ("replica-0", "replica-1"):
        (lws,) = [o for o in plan.objects if o["metadata"]["name"] == f"h200-2x2-{instance}"]
        validate(lws)
        leader_spec, worker_spec = pod_specs(lws)
        leader_argv = next(iter(containers(leader_spec).values()))["command"]
        worker_argv = next(iter(containers(worker_spec).values()))["command"]
        address = f"h200-2x2-{instance}-0.h200-2x2-{instance}.glm:5000"
        for argv in (leader_argv, worker_argv):
            assert argv[argv.index("--dist-init-addr") + 1] == address
        assert leader_argv[leader_argv.index("--node-rank") + 1] == "0"
        # The rank within the instance, not the recipe's node number (2 and 3 for replica-1).
        assert worker_argv[worker_argv.index("--node-rank") + 1] == f"$({LWS_WORKER_INDEX})"


def test_a_multi_node_instance_without_the_lws_crd_is_refused_naming_the_field() -> None:
    case = Case("h200-2x2", "h200", "high-throughput", options={"replicas": 2}, nodes=2)
    with pytest.raises(KubernetesRenderError) as info:
        case.plan()
    assert info.value.field == "nodes.source.leaderWorkerSet"
    assert "replica-0 runs on 2 nodes" in info.value.message


def test_one_node_replicas_need_no_lws() -> None:
    assert not H200_REPLICAS.source.leader_worker_set
    assert [o["kind"] for o in H200_REPLICAS.plan().objects if o["kind"] in POD_KINDS] == ["Deployment"] * 3


def test_the_catalog_cluster_on_kubernetes() -> None:
    b = load_stack("mi355x-k8s-replicas")
    plan = kubernetes_plan("mi355x-k8s-replicas", b.spec)
    for obj in plan.objects:
        validate(obj)
    router = next(launch for launch in plan.launches if launch.name == "router")
    assert _router_urls(list(router.argv)) == [
        "http://mi355x-k8s-replicas-replica-0.glm-replicas:31000",
        "http://mi355x-k8s-replicas-replica-1.glm-replicas:31000",
    ]
    assert router.argv[router.argv.index("--policy") + 1] == "round_robin"
    assert plan.endpoint == "http://mi355x-k8s-replicas.glm-replicas.svc:30000/v1"
    # hostPath cache: each replica downloads into its own node's cache before it serves.
    for instance in ("replica-0", "replica-1"):
        (dep,) = [
            o
            for o in plan.objects
            if o["kind"] == "Deployment" and o["metadata"]["name"] == f"mi355x-k8s-replicas-{instance}"
        ]
        inits = [c["name"] for c in dep["spec"]["template"]["spec"]["initContainers"]]
        assert inits[0] == "weights-client"


def test_plan_and_up_say_a_kubernetes_pd_update_cuts_the_group(tmp_path: Path) -> None:
    """`plan` and `up` announce what the Pulumi program does to a PD group on Kubernetes (the
    hosts' cut, made by renaming the group's workloads); replicas on Kubernetes say nothing."""
    from flashfleet.cli.up import phases
    from flashfleet.planning.plan_view import plan_data

    doc = yaml.safe_load(stack_path("mi355x-k8s-replicas", DEFAULT_STACKS_DIR).read_text())
    replicas = tmp_path / "Pulumi.k8s-replicas.yaml"
    replicas.write_text(yaml.safe_dump(doc))
    assert plan_data(load_stack("k8s-replicas", tmp_path)).update is None
    stack = doc["config"]["flashfleet:stack"]
    stack.update(hardware="gb300", topology="pd", strategy="high-throughput")
    stack["cluster"] = {"prefill": 1, "decode": 1, "router": {"policy": "cache_aware"}}
    stack["image"] = {"version": "v0.5.23", "derived": False}
    pools = stack["nodes"]["source"]["nodePools"]
    pools["gb300"] = {
        **pools.pop("mi355x"),
        "nodeSelector": {"node.kubernetes.io/instance-type": "p6e-gb300"},
    }
    pools["gb300"]["tolerations"] = []
    stack["nodes"]["source"]["namespace"] = "glm-pd"
    (tmp_path / "Pulumi.k8s-pd.yaml").write_text(yaml.safe_dump(doc))
    data = plan_data(load_stack("k8s-pd", tmp_path))
    assert data.update is not None
    assert data.update.how == "pd-cut"
    said = data.update.text()
    assert "named after the group's version" in said
    assert "the old deleted before the new is created" in said
    assert f"     {said}" in phases(data)


def test_gang_scheduling_puts_each_set_in_a_podgroup_that_wants_every_rank() -> None:
    from k8s_cases import GB300_PD_LWS, H200_LWS, source

    gang = dataclasses.replace(GB300_PD_LWS, source=source(leaderWorkerSet=True, gangScheduling=True))
    plan = gang.plan()
    kinds = [(o["kind"], o["metadata"]["name"]) for o in plan.objects]
    for name in plan.workloads[:-1]:
        # the PodGroup just before its set, of the same (versioned) name
        assert kinds.index(("PodGroup", name)) == kinds.index(("LeaderWorkerSet", name)) - 1
        (lws,) = [o for o in plan.objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == name]
        (group,) = [o for o in plan.objects if o["kind"] == "PodGroup" and o["metadata"]["name"] == name]
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
        lwt = lws["spec"]["leaderWorkerTemplate"]
        for role in ("leaderTemplate", "workerTemplate"):
            assert lwt[role]["spec"]["schedulingGroup"] == {"podGroupName": name}
    assert not [o for o in GB300_PD_LWS.plan().objects if o["kind"] == "PodGroup"]
    no_lws = dataclasses.replace(H200_LWS, source=source(gangScheduling=True))  # StatefulSets per rank
    with pytest.raises(KubernetesRenderError, match="gang scheduling is rendered for LeaderWorkerSets"):
        no_lws.plan()
