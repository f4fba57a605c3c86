"""The Kubernetes objects as an attacker reads them: an open LoadBalancer, floating image tags,
service-account tokens, unlimited pods, the HF token in the environment, an unfenced Mooncake
master, debugger capabilities on the ROCm server. Each case is the one the review found."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_cases import (
    ALL,
    H200_L3,
    H200_L3_STATEFULSETS,
    HOST_PATH,
    MI355X_AGENTX,
    POOLS,
    PVC,
    Case,
    containers,
    objects_of,
    pod_specs,
    source,
)
from pydantic import ValidationError

from flashfleet.cli import main
from flashfleet.k8s import plan_kubernetes
from flashfleet.k8s.weights import CLIENT_CONTAINER
from flashfleet.planning import load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR, list_stacks, stack_path

S = "flashfleet:stack"
SOURCE = f"{S}.nodes.source"
Doc = dict[str, Any]


def write_stack(tmp_path: Path, change: Callable[[Doc], None], base: str = "mi355x-k8s") -> Path:
    """A stacks folder holding Pulumi.broken.yaml: the catalog stack ``base`` after ``change``."""
    doc = copy.deepcopy(yaml.safe_load(stack_path(base, DEFAULT_STACKS_DIR).read_text()))
    change(doc)
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def source_keys(**keys: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc["config"][S]["nodes"]["source"].update(keys)

    return change


def validate_err(tmp_path: Path, change: Callable[[Doc], None], capsys: pytest.CaptureFixture[str]) -> str:
    stacks_dir = write_stack(tmp_path, change)
    assert main(["validate", "broken", "--stacks-dir", str(stacks_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# --- serviceType: LoadBalancer -------------------------------------------------------------------


def test_load_balancer_without_source_ranges_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = validate_err(tmp_path, source_keys(serviceType="LoadBalancer"), capsys)
    assert f"{SOURCE}.loadBalancerSourceRanges: serviceType LoadBalancer needs the client networks" in line
    assert "no API key" in line


def test_load_balancer_ranges_covering_the_internet_need_the_opt_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    halves = ["0.0.0.0/1", "128.0.0.0/1"]  # all of IPv4, in two pieces
    line = validate_err(
        tmp_path, source_keys(serviceType="LoadBalancer", loadBalancerSourceRanges=halves), capsys
    )
    assert f"{SOURCE}.loadBalancerSourceRanges: together these admit 86.2% of all IPv4" in line
    assert "allowPublicIngress: true" in line
    opted = write_stack(
        tmp_path,
        source_keys(serviceType="LoadBalancer", loadBalancerSourceRanges=halves, allowPublicIngress=True),
    )
    b = load_stack("broken", opted)
    assert any("answers anyone from 0.0.0.0/1, 128.0.0.0/1" in w for w in b.warnings)


def test_source_ranges_without_a_load_balancer_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = validate_err(tmp_path, source_keys(loadBalancerSourceRanges=["203.0.113.0/24"]), capsys)
    assert f"{SOURCE}.loadBalancerSourceRanges: only a serviceType: LoadBalancer" in line


def test_load_balancer_with_ranges_renders_them_into_the_service_and_plan_warns(tmp_path: Path) -> None:
    ranges = ["203.0.113.0/24", "2001:db8::/48"]
    stacks_dir = write_stack(
        tmp_path, source_keys(serviceType="LoadBalancer", loadBalancerSourceRanges=ranges)
    )
    b = load_stack("broken", stacks_dir)
    assert any(
        w.startswith("serviceType LoadBalancer: port 30000 answers anyone from 203.0.113.0/24, 2001:db8::/48")
        for w in b.warnings
    )
    src = b.spec.nodes.source
    settings = b.launch_settings()
    plan = plan_kubernetes(
        "broken",
        src,  # type: ignore[arg-type]
        hardware=b.spec.hardware,
        nodes=b.spec.nodes.count,
        recipe_for=b.recipe_for,
        settings=settings,
    )
    (svc,) = [o for o in objects_of(plan, "Service") if o["metadata"]["name"] == plan.endpoint_service]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["loadBalancerSourceRanges"] == ranges


def test_cluster_ip_service_carries_no_source_ranges() -> None:
    (svc,) = objects_of(Case("c", "gb300", "low-latency").plan(), "Service")
    assert svc["spec"]["type"] == "ClusterIP"
    assert "loadBalancerSourceRanges" not in svc["spec"]


# --- pinned images -------------------------------------------------------------------------------

FLOATING = ["python:slim", "python:3", "python:3.12", "python:stable", "python:edge", "3.12"]


@pytest.mark.parametrize("field", ["downloadImage", "pauseImage"])
@pytest.mark.parametrize("image", FLOATING)
def test_floating_tags_are_refused(field: str, image: str) -> None:
    with pytest.raises(ValidationError) as err:
        source(**{field: image})
    (error,) = err.value.errors()
    assert error["loc"] == (field,)
    assert "floats" in error["msg"]


def test_a_floating_download_image_fails_validate_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = validate_err(tmp_path, source_keys(downloadImage="python:3.12"), capsys)
    assert line.startswith(f"FAIL stack broken: {SOURCE}.downloadImage: 'python:3.12' floats")


@pytest.mark.parametrize(
    "image",
    ["python:3.12.12-slim-bookworm", "registry.k8s.io/pause:3.10.1", "python:slim@sha256:" + "0" * 64],
)
def test_a_whole_release_or_a_digest_pins(image: str) -> None:
    assert source(downloadImage=image, pauseImage=image).pause_image == image


# --- every pod the source renders ----------------------------------------------------------------


def _catalog_plans() -> Iterator[tuple[str, Any]]:
    """Every catalog stack on the Kubernetes source, with a shared claim and with a host path."""
    for stack in list_stacks():
        b = load_stack(stack)
        settings = b.launch_settings()
        settings = settings.model_copy(update={"image": settings.image.model_copy(update={"derived": False})})
        for cache in (PVC, HOST_PATH):
            nodes = b.spec.nodes.count
            src = source(modelCache=cache, leaderWorkerSet=nodes > 1)
            yield (
                f"{stack}/{cache['kind']}",
                plan_kubernetes(
                    stack,
                    src,
                    hardware=b.spec.hardware,
                    nodes=nodes,
                    recipe_for=b.recipe_for,
                    settings=settings,
                    mooncake=b.spec.mooncake,
                ),
            )


PLANS = dict(_catalog_plans())


@pytest.mark.parametrize("name", list(PLANS))
def test_every_pod_is_fenced(name: str) -> None:
    plan = PLANS[name]
    pods = [pod for obj in plan.objects for pod in pod_specs(obj)]
    assert pods
    for pod in pods:
        assert pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in containers(pod).values():
            where = f"{name}: {c['name']}"
            res = c["resources"]
            assert {"cpu", "memory"} <= set(res["limits"]), where
            assert {"cpu", "memory"} <= set(res["requests"]), where
            env = {e["name"]: e for e in c.get("env", [])}
            assert "HF_TOKEN" not in env, where
            assert not [e for e in env.values() if "secretKeyRef" in e.get("valueFrom", {})], where
            if "HF_TOKEN_PATH" in env:
                path = env["HF_TOKEN_PATH"]["value"]
                (mount,) = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
                assert mount["readOnly"] is True, where
                secret = volumes[mount["name"]]["secret"]
                assert secret["secretName"] == plan.secret_name, where
                assert path.rsplit("/", 1)[1] == "HF_TOKEN"  # the Secret's key, projected as a file
                assert secret["defaultMode"] == 0o400


@pytest.mark.parametrize("name", list(PLANS))
def test_every_model_loading_container_has_the_token_file(name: str) -> None:
    plan = PLANS[name]
    loaders = {launch.name for launch in plan.launches if launch.secret_env_names}
    seen = {
        n: c
        for obj in plan.objects
        for pod in pod_specs(obj)
        for n, c in containers(pod).items()
        if n in loaders or (n.startswith("weights-") and n != CLIENT_CONTAINER)  # the downloads
    }
    assert loaders <= set(seen) | {"server-2", "server-3"}  # LWS: ranks 2.. share the worker template
    assert any(n.startswith("weights-") for n in seen)
    for n, c in seen.items():
        assert any(e["name"] == "HF_TOKEN_PATH" for e in c["env"]), n


def test_gpu_servers_share_the_pools_server_resources() -> None:
    """A pod never asks for more than the stack says its node gives one server pod."""
    for case in ALL:
        pool = POOLS[case.hardware]["serverResources"]
        plan = case.plan()
        with_gpus = {launch.name for launch in plan.launches if launch.gpus}
        for obj in plan.objects:
            for pod in pod_specs(obj):
                gpu = [c for n, c in containers(pod).items() if n in with_gpus]
                if not gpu:
                    continue
                cpu = sum(_cores(c["resources"]["limits"]["cpu"]) for c in gpu)
                mem = sum(_gib(c["resources"]["limits"]["memory"]) for c in gpu)
                assert cpu <= pool["cpu"], case.stack
                assert mem <= pool["memoryGib"], case.stack
                for c in gpu:
                    assert c["resources"]["requests"] == {
                        k: v for k, v in c["resources"]["limits"].items() if k in ("cpu", "memory")
                    }


def _cores(q: str) -> float:
    return int(q[:-1]) / 1000 if q.endswith("m") else int(q)


def _gib(q: str) -> float:
    return int(q[:-2]) / 1024 if q.endswith("Mi") else int(q[:-2])


def test_server_resources_are_required_for_a_pool() -> None:
    pools = {"gb300": {k: v for k, v in POOLS["gb300"].items() if k != "serverResources"}}
    with pytest.raises(ValidationError) as err:
        source(nodePools=pools)
    assert [e["loc"] for e in err.value.errors()] == [("nodePools", "gb300", "serverResources")]


# --- the Mooncake master --------------------------------------------------------------------------


@pytest.mark.parametrize("case", [H200_L3, H200_L3_STATEFULSETS], ids=lambda c: c.stack)
def test_a_network_policy_admits_only_the_stacks_servers_to_the_mooncake_master(case: Case) -> None:
    plan = case.plan()
    (policy,) = objects_of(plan, "NetworkPolicy")
    master = next(o for o in objects_of(plan, "Deployment") if o["metadata"]["name"].endswith("-mooncake"))
    master_labels = master["spec"]["template"]["metadata"]["labels"]
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= master_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (master_c,) = master["spec"]["template"]["spec"]["containers"]
    assert sorted(p["port"] for p in rule["ports"]) == sorted(p["containerPort"] for p in master_c["ports"])
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # this namespace only, no ipBlock
    admitted = peer["podSelector"]["matchLabels"]
    assert admitted["app.kubernetes.io/instance"] == case.stack
    # every server pod (each rank) matches; no other pod of the stack does, nor another stack's
    for obj in plan.objects:
        for pod_labels in _pod_labels(obj):
            serves = obj["kind"] in ("StatefulSet", "LeaderWorkerSet") or obj["metadata"]["name"].endswith(
                "-serve"
            )
            assert (admitted.items() <= pod_labels.items()) == serves, obj["metadata"]["name"]
    other = next(o for o in objects_of(Case("other", "h200", "low-latency").plan(), "Deployment"))
    assert not admitted.items() <= other["spec"]["template"]["metadata"]["labels"].items()


def _pod_labels(obj: dict[str, Any]) -> list[dict[str, str]]:
    spec = obj.get("spec", {})
    if obj["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["metadata"]["labels"], lwt["workerTemplate"]["metadata"]["labels"]]
    return [spec["template"]["metadata"]["labels"]] if "template" in spec else []


# --- the MI355X server ---------------------------------------------------------------------------


def test_the_rocm_server_gets_no_debugger_capability() -> None:
    plan = MI355X_AGENTX.plan()
    (launch,) = plan.launches
    assert "SYS_PTRACE" in launch.cap_add  # the docker launch (SGLang's ROCm command) still asks
    for obj in plan.objects:
        for pod in pod_specs(obj):
            for c in containers(pod).values():
                # none added (helpers drop them all: test_every_helper_container_runs_without_privilege)
                assert "add" not in c.get("securityContext", {}).get("capabilities", {}), c["name"]
    (server,) = objects_of(plan, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    # seccomp unconfined stays: ROCm's container guide recommends it for HPC containers
    assert server["securityContext"] == {"seccompProfile": {"type": "Unconfined"}}


@pytest.mark.parametrize("name", list(PLANS))
def test_every_helper_container_runs_without_privilege(name: str) -> None:
    """The finding: the weights downloads, the router, the Mooncake master and the pre-pull pods
    ran with no securityContext at all. Each container that holds no GPU may not gain
    privilege, holds no capability and runs under the runtime's default seccomp profile; the
    pre-pull pods also as a non-root user."""
    plan = PLANS[name]
    gpu_launches = {launch.name for launch in plan.launches if launch.gpus}
    helpers = 0
    for obj in plan.objects:
        for pod in pod_specs(obj):
            for c in containers(pod).values():
                limits = c["resources"].get("limits", {})
                gpu = c["name"] in gpu_launches or any(k.endswith("/gpu") for k in limits)
                if gpu or c["resources"].get("claims"):
                    continue  # a GPU server: its own context (root, the image's devices)
                helpers += 1
                ctx = c.get("securityContext") or {}
                where = f"{name}: {obj['kind']} {c['name']}"
                assert ctx.get("allowPrivilegeEscalation") is False, where
                assert ctx.get("capabilities") == {"drop": ["ALL"]}, where
                assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, where
                if obj["kind"] == "DaemonSet":  # the pre-pull pods: `true` and pause
                    assert ctx.get("runAsNonRoot") is True, where
                    assert ctx.get("runAsUser") == 65534, where
    assert helpers >= 2  # the download's client install and one download at least
