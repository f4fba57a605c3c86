"""`pulumi up` of the catalog's Kubernetes stacks, through the project's own program and component,
the real Pulumi engine and the pulumi-kubernetes provider plugin (scripts/setup.d/40-pulumi.sh and
47-pulumi-kubernetes.sh), against the local control plane with simulated GPU nodes.

The stack files are the catalog's, unchanged: their kubeconfig context (`mi355x-cluster`) is a
context of the test kubeconfig. `up` waits, as the provider does, for every awaited workload to be
ready (kwok makes the pods Running and Ready); the second `up` must change nothing; an option
change must roll out on nodes whose GPUs hold one copy; `destroy` must leave nothing behind.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from control_plane import ControlPlane
from e2e.engine import pulumi_cli, pulumi_env, write_program
from sim_nodes import add_plain_node, add_pool_nodes, provision_claims
from test_scheduling import OWNED_KINDS

from flashfleet.k8s import names
from flashfleet.k8s.namespace_owner import CREATED_BY
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.files import stack_path

REPO = Path(__file__).resolve().parents[3]
PROVIDER = REPO / ".tools" / "bin" / "pulumi-resource-kubernetes"
TOKEN = "hf_e2eTokenThatMustNeverBeSeenInPlainText"


@pytest.fixture
def project(cluster: ControlPlane, tmp_path: Path) -> Iterator[Path]:
    if pulumi_cli() is None or not PROVIDER.exists():
        pytest.fail(
            "no Pulumi CLI or kubernetes provider: run scripts/setup.d/40-pulumi.sh and 47-pulumi-kubernetes.sh"
        )
    write_program(tmp_path / "project")
    (tmp_path / "state").mkdir()
    yield tmp_path / "project"
    cluster.reset()


def _kubeconfig(cluster: ControlPlane, workdir: Path, context: str) -> Path:
    """The test kubeconfig with its context named as the stack names it."""
    cfg = json.loads(cluster.kubeconfig.read_text())
    cfg["contexts"][0]["name"] = cfg["current-context"] = context
    path = workdir / "kubeconfig"
    path.write_text(json.dumps(cfg))
    return path


def _pulumi(project: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**pulumi_env(project.parent, project), "KUBECONFIG": str(kubeconfig)}
    env["PATH"] = f"{PROVIDER.parent}:{env['PATH']}"
    return subprocess.run(
        ["pulumi", *args, "--non-interactive"], cwd=project, env=env,
        text=True, capture_output=True, check=False, timeout=600,
    )  # fmt: skip


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


@pytest.mark.parametrize("stack", ["mi355x-k8s", "mi355x-k8s-replicas"])
def test_up_serves_a_second_up_changes_nothing_and_destroy_leaves_nothing(
    cluster: ControlPlane, project: Path, stack: str
) -> None:
    spec = load_stack(stack).spec
    source = spec.nodes.source
    pool = add_pool_nodes(cluster, source, spec.hardware, spec.nodes.count, prefix=f"{stack}-gpu")  # type: ignore[arg-type]
    add_plain_node(cluster, "cpu-0")
    shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
    kubeconfig = _kubeconfig(cluster, project.parent, source.context)  # type: ignore[union-attr]
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    _ok(
        _pulumi(
            project, kubeconfig, "config", "set", "--secret", "flashfleet:hfToken", TOKEN, "--stack", stack
        )
    )

    _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", stack))
    sel, ns = f"{names.LABEL_INSTANCE}={stack}", source.namespace  # type: ignore[union-attr]
    serving = cluster.items("pods", namespace=ns, selector=f"{sel},app.kubernetes.io/component=serve")
    assert len(serving) == spec.nodes.count
    assert {p["spec"]["nodeName"] for p in serving} <= set(pool)
    assert all(p["status"]["phase"] == "Running" for p in serving)
    secret = cluster.get("secret", names.secret_name(stack), namespace=ns)
    assert secret["metadata"]["labels"][names.LABEL_INSTANCE] == stack
    # the evidence that this stack's destroy may delete the namespace travels with it
    assert cluster.get("namespace", ns)["metadata"]["annotations"][CREATED_BY] == stack
    # the token is in the cluster's Secret, and never in plain text in the stack's state
    exported = _ok(_pulumi(project, kubeconfig, "stack", "export", "--stack", stack))
    assert TOKEN not in exported
    outputs = json.loads(_ok(_pulumi(project, kubeconfig, "stack", "output", "--json", "--stack", stack)))
    assert TOKEN not in json.dumps(outputs)

    again = _ok(_pulumi(project, kubeconfig, "preview", "--expect-no-changes", "--diff", "--stack", stack))
    assert "to update" not in again

    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stack))
    left = cluster.kubectl("get", OWNED_KINDS, "-A", "-l", sel, "-o", "name")
    assert left.strip() == ""
    assert cluster.get("namespace", ns) is None


def test_up_refuses_a_namespace_flashfleet_did_not_create(cluster: ControlPlane, project: Path) -> None:
    """The user's own namespace `glm`, with their ConfigMap in it, and a stack that creates `glm`:
    pulumi-kubernetes 4.25 would take the namespace over (a server-side apply) and `destroy` would
    delete it with the ConfigMap. The program refuses before any object, in one line."""
    stack = "mi355x-k8s"
    add_pool_nodes(cluster, load_stack(stack).spec.nodes.source, "mi355x", 1, prefix="mi355x", gpus=4)  # type: ignore[arg-type]
    cluster.kubectl("create", "namespace", "glm")
    try:
        cluster.kubectl("create", "configmap", "theirs", "-n", "glm", "--from-literal=keep=me")
        shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
        kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
        _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
        cli = _flashfleet(project, kubeconfig, "up", stack, "--yes")
        assert cli.returncode == 2, cli.stdout + cli.stderr
        (line,) = cli.stderr.strip().splitlines()
        assert line.startswith(
            f"flashfleet up: stack {stack}: flashfleet:stack.nodes.source.namespace: namespace glm "
            "already exists and flashfleet did not create it"
        ), line
        # plain `pulumi up`, without flashfleet's CLI: the program refuses it as well
        up = _pulumi(project, kubeconfig, "up", "--yes", "--stack", stack)
        out = up.stdout + up.stderr
        assert up.returncode != 0, out
        assert (
            "flashfleet:stack.nodes.source.namespace: namespace glm already exists and flashfleet did "
            "not create it"
        ) in out, out
        assert "[rule: namespace-not-ours]" in out
        namespace = cluster.get("namespace", "glm")
        assert CREATED_BY not in (namespace["metadata"].get("annotations") or {})
        assert names.LABEL_MANAGED_BY not in namespace["metadata"].get("labels", {})  # not taken over
        assert [c["metadata"]["name"] for c in cluster.items("configmaps", namespace="glm")] == [
            "kube-root-ca.crt",
            "theirs",
        ]
        assert (
            cluster.kubectl("get", OWNED_KINDS, "-A", "-l", f"{names.LABEL_INSTANCE}={stack}", "-o", "name")
            == ""
        )
        assert "kubernetes:core/v1:Namespace" not in _ok(
            _pulumi(project, kubeconfig, "stack", "export", "--stack", stack)
        )
        _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stack))  # nothing of theirs goes
        assert cluster.get("configmap", "theirs", namespace="glm") is not None
    finally:
        cluster.kubectl("delete", "namespace", "glm", "--wait=true", "--timeout=120s")


def test_an_option_change_is_an_update_that_rolls_out(cluster: ControlPlane, project: Path) -> None:
    stack = "mi355x-k8s"
    spec = load_stack(stack).spec
    add_pool_nodes(cluster, spec.nodes.source, "mi355x", 1, prefix="mi355x", gpus=4)  # type: ignore[arg-type]
    file = stack_path(stack, project / "stacks")
    shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), file)
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", stack))
    sel = f"{names.LABEL_INSTANCE}={stack},app.kubernetes.io/component=serve"
    (before,) = cluster.items("pods", namespace="glm", selector=sel)

    doc = yaml.safe_load(file.read_text())
    doc["config"]["flashfleet:stack"]["options"] = {"max_running_requests": 64}
    file.write_text(yaml.safe_dump(doc))
    out = _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", stack))
    assert "1 updated" in out, out
    pods = [
        p
        for p in cluster.items("pods", namespace="glm", selector=sel)
        if "deletionTimestamp" not in p["metadata"]
    ]
    (after,) = pods
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    server = next(c for c in after["spec"]["containers"] if c["name"] == "server")
    assert "--max-running-requests" in server["command"]
    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stack))


def test_destroying_one_catalog_stack_leaves_the_other_serving(cluster: ControlPlane, project: Path) -> None:
    """Both catalog stacks on one cluster: each has a namespace of its own (two stacks in one
    namespace that either creates are refused offline), so one's destroy spares the other."""
    stacks = ("mi355x-k8s", "mi355x-k8s-replicas")
    add_pool_nodes(cluster, load_stack(stacks[0]).spec.nodes.source, "mi355x", 3, prefix="mi355x")  # type: ignore[arg-type]
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    for stack in stacks:
        shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
        _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
        _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", stack))
    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stacks[0]))
    survivor = load_stack(stacks[1]).spec.nodes.source.namespace  # type: ignore[union-attr]
    deployments = cluster.items(
        "deployments", namespace=survivor, selector=f"{names.LABEL_INSTANCE}={stacks[1]}"
    )
    assert len(deployments) == 3  # two replicas and the router
    assert all(d["status"].get("readyReplicas") == 1 for d in deployments)
    _ok(_pulumi(project, kubeconfig, "preview", "--expect-no-changes", "--stack", stacks[1]))
    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stacks[1]))


def _flashfleet(project: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**pulumi_env(project.parent, project), "KUBECONFIG": str(kubeconfig)}
    env["PATH"] = f"{PROVIDER.parent}:{env['PATH']}"
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "flashfleet", *args], cwd=project, env=env,
        text=True, capture_output=True, check=False, timeout=600,
    )  # fmt: skip


def test_flashfleet_up_status_and_down_with_a_shared_cache_claim(
    cluster: ControlPlane, project: Path
) -> None:
    """The CLI a user runs, on the catalog stack moved to a shared (ReadWriteMany) claim: the
    provider awaits the weights Job before the server; `down` keeps the claim (and the namespace
    holding it) for the next `up`, which takes them over; with teardown.keepCaches: false, `down`
    deletes them too."""
    stack = "mi355x-k8s"
    file = stack_path(stack, project / "stacks")
    doc = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text())
    source = doc["config"]["flashfleet:stack"]["nodes"]["source"]
    source["modelCache"] = {"kind": "pvc", "storageClass": "shared-fs", "size": "2Ti"}
    file.write_text(yaml.safe_dump(doc))
    spec = load_stack(stack, project / "stacks").spec
    plan = kubernetes_plan(stack, spec)
    assert plan.weights_job is not None
    provision_claims(cluster, list(plan.objects))
    add_pool_nodes(cluster, spec.nodes.source, "mi355x", 1, prefix="mi355x")  # type: ignore[arg-type]
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    claim = names.model_cache_claim(stack)

    def cli(*args: str) -> str:
        done = _flashfleet(project, kubeconfig, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "endpoint: http://mi355x-k8s.glm.svc:30000/v1" in cli("up", stack, "--yes")
    job = cluster.get("job", plan.weights_job, namespace="glm")
    assert job["status"]["succeeded"] == 1
    server = cluster.get("deployment", f"{stack}-serve", namespace="glm")
    # the server was created only once the Job had completed (the component's dependency)
    assert server["metadata"]["creationTimestamp"] >= job["status"]["completionTime"]
    pvc = cluster.get("pvc", claim, namespace="glm")
    assert pvc["status"]["phase"] == "Bound"
    assert "mi355x-k8s-serve" in cli("status", stack)

    said = cli("down", stack, "--yes")
    assert f"keeps the model cache claim glm/{claim} (2Ti) and namespace glm, which holds it" in said
    sel = f"{names.LABEL_INSTANCE}={stack}"
    assert cluster.kubectl("get", OWNED_KINDS, "-A", "-l", sel, "-o", "name").split() == [
        f"persistentvolumeclaim/{claim}"
    ]
    assert cluster.get("namespace", "glm") is not None

    cli("up", stack, "--yes")  # takes the claim over: the same volume, with the weights on it
    again = cluster.get("pvc", claim, namespace="glm")
    assert again["metadata"]["uid"] == pvc["metadata"]["uid"]
    assert again["spec"]["volumeName"] == pvc["spec"]["volumeName"]

    doc["config"]["flashfleet:stack"]["teardown"] = {"keepCaches": False}
    file.write_text(yaml.safe_dump(doc))
    cli("up", stack, "--yes")
    assert f"deletes the model cache claim glm/{claim} with the rest" in cli("down", stack, "--yes")
    assert cluster.kubectl("get", OWNED_KINDS, "-A", "-l", sel, "-o", "name").strip() == ""
    assert cluster.get("namespace", "glm") is None


def test_up_refuses_a_cluster_whose_nodes_cannot_hold_the_pods(cluster: ControlPlane, project: Path) -> None:
    """The pool's one node offers 2 GPUs where the server takes 4 (gpusPerNode unset, so the
    stack file alone cannot know): `up` reads the nodes and refuses before anything is applied."""
    stack = "mi355x-k8s"
    add_pool_nodes(cluster, load_stack(stack).spec.nodes.source, "mi355x", 1, prefix="mi355x", gpus=2)  # type: ignore[arg-type]
    shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    up = _flashfleet(project, kubeconfig, "up", stack, "--yes")
    assert up.returncode == 2, up.stdout + up.stderr
    (line,) = up.stderr.strip().splitlines()
    assert line.endswith(
        "flashfleet:stack.nodes.source.nodePools.mi355x: the pool's nodes (nodeSelector "
        "{'amd.com/gpu.product-name': 'AMD_Instinct_MI355X'}) hold 0 of the 1 server pod(s) of 4 amd.com/gpu; "
        "allocatable amd.com/gpu per node: mi355x-0: 2"
    ), line
    assert cluster.get("namespace", "glm") is None  # nothing applied
    assert "kubernetes:" not in _ok(_pulumi(project, kubeconfig, "stack", "export", "--stack", stack))


def test_up_fails_with_the_pod_and_the_schedulers_reason_not_a_timeout(
    cluster: ControlPlane, project: Path
) -> None:
    """The node has the GPUs but not the CPU the server pod asks for (64 cores of 32): no GPU
    count says so, the pod stays Pending, and `up` says why once the verdict has stood."""
    stack = "mi355x-k8s"
    add_pool_nodes(cluster, load_stack(stack).spec.nodes.source, "mi355x", 1, prefix="mi355x", cpu=32)  # type: ignore[arg-type]
    shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, project / "stacks"))
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    started = time.monotonic()
    up = _flashfleet(project, kubeconfig, "up", stack, "--yes", "--pending-grace", "10")
    took = time.monotonic() - started
    assert up.returncode == 1, up.stdout + up.stderr
    assert took < 120  # not the provider's 3-hour timeout
    lines = up.stderr.strip().splitlines()
    assert re.fullmatch(
        r"flashfleet up: pod glm/mi355x-k8s-serve-[a-z0-9]+-[a-z0-9]+ cannot be scheduled: "
        r"0/1 nodes are available: 1 Insufficient cpu\..*",
        lines[0],
    ), up.stderr
    assert "stays for `flashfleet down mi355x-k8s`" in lines[-1]
    # the cancelled update recorded what it made: down removes it
    down = _flashfleet(project, kubeconfig, "down", stack, "--yes")
    assert down.returncode == 0, down.stdout + down.stderr
    left = cluster.kubectl("get", OWNED_KINDS, "-A", "-l", f"{names.LABEL_INSTANCE}={stack}", "-o", "name")
    assert left.strip() == ""


def test_a_load_balancer_endpoint_is_the_address_the_cloud_gives_it(
    cluster: ControlPlane, project: Path
) -> None:
    """serviceType LoadBalancer: the provider awaits the Service until the cloud's load-balancer
    controller (here the test, writing the Service's status as one would) gives it an address,
    and the stack's endpoint output is that address."""
    stack = "mi355x-k8s"
    doc = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text())
    source = doc["config"]["flashfleet:stack"]["nodes"]["source"]
    source.update(serviceType="LoadBalancer", loadBalancerSourceRanges=["203.0.113.0/24"])
    stack_path(stack, project / "stacks").write_text(yaml.safe_dump(doc))
    add_pool_nodes(cluster, load_stack(stack, project / "stacks").spec.nodes.source, "mi355x", 1, prefix="m")  # type: ignore[arg-type]
    kubeconfig = _kubeconfig(cluster, project.parent, "mi355x-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", stack))
    env = {**pulumi_env(project.parent, project), "KUBECONFIG": str(kubeconfig)}
    env["PATH"] = f"{PROVIDER.parent}:{env['PATH']}"
    up = subprocess.Popen(
        ["pulumi", "up", "--yes", "--stack", stack, "--non-interactive"], cwd=project, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    hostname = "k8s-glm-mi355x-0123456789.elb.us-east-1.amazonaws.com"
    service = cluster.wait_for(
        lambda: cluster.get("service", stack, namespace="glm"), what="the endpoint Service"
    )
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    cluster.kubectl(
        "patch", "service", stack, "-n", "glm", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}}}),
    )  # fmt: skip
    out, _ = up.communicate(timeout=300)
    assert up.returncode == 0, out
    outputs = json.loads(_ok(_pulumi(project, kubeconfig, "stack", "output", "--json", "--stack", stack)))
    assert outputs["endpoint"] == f"http://{hostname}:30000/v1"
    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", stack))


PD_STACK = "gb300-pd-k8s"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
WORKER_URL = re.compile(r"^http://[^.]+\.([^.:]+)\.")  # an LWS leader's DNS name: <pod>.<set>.<ns>


def _pd_stack(project: Path, options: dict[str, object]) -> None:
    """GB300 PD, one prefill and one decode, each tensor parallel over 2 nodes (LeaderWorkerSets)."""
    doc = {
        "config": {
            "flashfleet:stack": {
                "description": "GB300 PD on Kubernetes, each instance over 2 nodes",
                "hardware": "gb300",
                "strategy": "high-throughput",
                "topology": "pd",
                "options": options,
                "cluster": {
                    "prefill": 1,
                    "decode": 1,
                    "nodesPerInstance": 2,
                    "router": {"policy": "cache_aware"},
                },
                "ttl": "8h",
                "image": {"version": "v0.5.23", "derived": False},
                "nodes": {
                    "count": 4,
                    "source": {
                        "kind": "kubernetes",
                        "context": "gb300-cluster",
                        "namespace": "glm-pd",
                        "createNamespace": True,
                        "leaderWorkerSet": True,
                        "nodePools": {
                            "gb300": {
                                "serverResources": {"cpu": 64, "memoryGib": 512},
                                "nodeSelector": {"node.kubernetes.io/instance-type": "p6e-gb300.36xlarge"},
                                "tolerations": [
                                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                                ],
                            }
                        },
                        "modelCache": {"kind": "hostPath", "path": "/mnt/nvme/hf-cache"},
                        "serviceType": "ClusterIP",
                    },
                },
            }
        }
    }
    stack_path(PD_STACK, project / "stacks").write_text(yaml.safe_dump(doc))


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def _snapshot(cluster: ControlPlane, ns: str) -> list[dict[str, Any]]:
    return cluster.items("pods", namespace=ns, selector=f"{names.LABEL_INSTANCE}={PD_STACK}")


def _behind_each_router(pods: list[dict[str, Any]]) -> list[tuple[str, str, set[str]]]:
    """Each ready router pod: its version label, and the versions of the ready pods its argv's
    workers resolve to (an LWS leader's name resolves through the set's headless Service to the
    pods labelled with the set's name)."""
    out = []
    for router in pods:
        labels = router["metadata"]["labels"]
        if labels.get(names.LABEL_CLUSTER_INSTANCE) != "router" or not _ready(router):
            continue
        argv = router["spec"]["containers"][0]["command"]
        sets = {m.group(1) for w in argv if (m := WORKER_URL.match(w))}
        assert len(sets) == 2, argv  # the prefill's set and the decode's
        reached = {
            p["metadata"]["labels"][names.LABEL_PD_VERSION]
            for p in pods
            if p["metadata"]["labels"].get(LWS_NAME) in sets and _ready(p)
        }
        out.append((router["metadata"]["name"], labels[names.LABEL_PD_VERSION], reached))
    return out


def test_a_pd_update_cuts_the_whole_group_and_no_router_reaches_two_versions(
    cluster: ControlPlane, project: Path
) -> None:
    """`pulumi up` of a PD stack over LeaderWorkerSets, then a server option change: each
    instance's set is replaced by one of the new version's name (the old deleted first), the
    router is updated to name the new sets only. Watched throughout: no ready router reaches a
    pod of another version than its own, and both versions' revisions are seen. `destroy` then
    leaves no object behind, the controller's too."""
    _pd_stack(project, {})
    spec = load_stack(PD_STACK, project / "stacks").spec
    pool = add_pool_nodes(cluster, spec.nodes.source, "gb300", 4, prefix="gb300")  # type: ignore[arg-type]
    add_plain_node(cluster, "cpu-0")
    old = kubernetes_plan(PD_STACK, spec)
    assert old.pd_version is not None
    kubeconfig = _kubeconfig(cluster, project.parent, "gb300-cluster")
    _ok(_pulumi(project, kubeconfig, "stack", "init", PD_STACK))
    _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", PD_STACK))
    ns = "glm-pd"

    def serving(version: str) -> list[dict[str, Any]] | None:
        pods = [p for p in _snapshot(cluster, ns) if _ready(p)]
        group = [p for p in pods if p["metadata"]["labels"].get(names.LABEL_PD_VERSION) == version]
        return pods if len(group) == 5 else None  # 2 + 2 ranks and the router

    first = cluster.wait_for(
        lambda: serving(old.pd_version), what="the first group", namespace=ns, timeout_s=120
    )
    assert {p["spec"]["nodeName"] for p in first if "router" not in p["metadata"]["name"]} == set(pool)

    _pd_stack(project, {"max_running_requests": 64})
    new = kubernetes_plan(PD_STACK, load_stack(PD_STACK, project / "stacks").spec)
    assert new.pd_version not in (None, old.pd_version)
    seen: list[list[dict[str, Any]]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(_snapshot(cluster, ns))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = _ok(_pulumi(project, kubeconfig, "up", "--yes", "--stack", PD_STACK))
        last = cluster.wait_for(
            lambda: serving(new.pd_version), what="the new group", namespace=ns, timeout_s=120
        )
    finally:
        done.set()
        watcher.join()
    seen.append(last)
    revisions: dict[str, set[str]] = {}
    routers: dict[str, str] = {}
    for pods in seen:
        for name, version, reached in _behind_each_router(pods):
            assert reached <= {version}, f"{name} of {version} reaches ready pods of {reached}"
            routers[name] = version
        for p in pods:
            labels = p["metadata"]["labels"]
            if LWS_REVISION in labels:
                revisions.setdefault(labels[names.LABEL_PD_VERSION], set()).add(labels[LWS_REVISION])
    assert set(revisions) == {old.pd_version, new.pd_version}, revisions
    assert set(routers.values()) == {old.pd_version, new.pd_version}, routers  # one router pod each
    # every object of each instance is replaced (its set; a one-node instance would add its
    # Service), and the router's Deployment is updated in place
    assert re.search(r"\b2 replaced\b", out), out
    assert re.search(r"\b1 updated\b", out), out
    print(f"revisions seen: {revisions}; routers: {routers}; snapshots: {len(seen)}")
    # the old group is gone: only the new version's sets
    sets = cluster.items("leaderworkersets", namespace=ns, selector=f"{names.LABEL_INSTANCE}={PD_STACK}")
    assert sorted(s["metadata"]["name"] for s in sets) == sorted(new.workloads[:-1])

    _ok(_pulumi(project, kubeconfig, "destroy", "--yes", "--stack", PD_STACK))
    left = cluster.kubectl(
        "get",
        f"{OWNED_KINDS},leaderworkersets",
        "-A",
        "-l",
        f"{names.LABEL_INSTANCE}={PD_STACK}",
        "-o",
        "name",
    )
    assert left.strip() == ""
    assert cluster.get("namespace", ns) is None
