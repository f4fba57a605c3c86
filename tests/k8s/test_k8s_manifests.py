"""Pure manifest rendering: each container is its container launch, translated, never re-listed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from k8s_cases import (
    ALL,
    GB300_ENCODER,
    GB300_LOWLAT,
    GB300_PD,
    GB300_PD_LWS,
    GB300_TP16,
    H200_DFLASH2,
    H200_L3,
    H200_L3_STATEFULSETS,
    H200_LWS,
    MI355X_AGENTX,
    MI355X_LWS,
    POOLS,
    Case,
    containers,
    objects_of,
    pod_specs,
    source,
)

from flashfleet.catalog import DFLASH2_DRAFT, download_client
from flashfleet.k8s import KubernetesRenderError, plan_kubernetes, resources
from flashfleet.k8s.containers import MOONCAKE_HOSTNAME_ENV, TOKEN_FILE_ENV
from flashfleet.k8s.weights import FETCH_PROGRAM as PROGRAM
from flashfleet.launch import LaunchSettings
from flashfleet.recipes.layouts import MOONCAKE_CONFIG_ENV, MOONCAKE_CONFIG_PATH
from flashfleet.stack.image import ImageSpec

SERVE_CASES = [
    GB300_LOWLAT,
    MI355X_AGENTX,
    GB300_PD,
    H200_L3,
    H200_L3_STATEFULSETS,
    GB300_ENCODER,
    H200_DFLASH2,
]


def download_argv(repo: str | None) -> list[str]:
    """The hosts' download program (roles/model_weights/files/weights_fetch.py) with the request a
    host's role gives it, from the catalog's client (written out here, so a change of the
    renderer's request shows); None: the client install alone."""
    client = download_client()
    request = {
        "repos": [repo] if repo else [], "revision": client.revision, "lock": {},
        "cache_dir": "/root/.cache/huggingface", "hub_dir": "/root/.cache/huggingface/hub",
        "marker_dir": "/root/.cache/huggingface/.flashfleet-complete", "venv": "/opt/flashfleet/hf-client",
        "hub_version": client.hub_version, "hub_sha256": [], "pip_args": [], "endpoint": "https://huggingface.co",
        "max_workers": client.max_workers, "token_file": "/etc/flashfleet/hf-token/HF_TOKEN",
        "keep_token_file": True, "timeout_s": 14400,
    }  # fmt: skip
    return [
        "python",
        f"/opt/flashfleet/weights-fetch/{PROGRAM.name}",
        "--request",
        json.dumps(request, sort_keys=True),
    ]


def _workload_containers(case: Case) -> dict[str, dict[str, Any]]:
    plan = case.plan()
    out: dict[str, dict[str, Any]] = {}
    for obj in plan.objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "LeaderWorkerSet") and obj["metadata"]["name"] in str(
            plan.workloads
        ):
            for pod in pod_specs(obj):
                out.update({n: c for n, c in containers(pod).items() if not n.startswith("weights-")})
    return out


def _expand(word: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], word)


@pytest.mark.parametrize("case", SERVE_CASES, ids=lambda c: c.stack)
def test_each_container_is_its_launch(case: Case) -> None:
    plan = case.plan()
    by_name = _workload_containers(case)
    # Every launch runs somewhere; for an LWS, ranks 1.. share the worker template.
    expected = {launch.name for launch in plan.launches}
    if case.source.leader_worker_set and case.nodes > 1:
        expected = {"server-0", "server-1"}
    assert set(by_name) == expected
    for launch in plan.launches:
        name = launch.name if launch.name in by_name else "server-1"
        c = by_name[name]
        command = [_expand(w, {"LWS_WORKER_INDEX": str(launch.node)}) for w in c["command"]]
        assert command == list(launch.argv)
        assert "args" not in c
        assert c["image"] == launch.image
        env_names = [e["name"] for e in c["env"]]
        extra = [MOONCAKE_HOSTNAME_ENV] if case.mooncake is not None else []
        token_files = [TOKEN_FILE_ENV[name] for name in launch.secret_env_names]
        assert env_names == [*launch.env, *token_files, *extra]
        values = {e["name"]: e["value"] for e in c["env"] if "value" in e and e["name"] not in token_files}
        assert values == launch.env


def test_gb300_low_latency() -> None:
    plan = GB300_LOWLAT.plan()
    assert [o["kind"] for o in plan.objects] == [
        "Namespace",
        "PersistentVolumeClaim",
        "DaemonSet",
        "ConfigMap",
        "Job",
        "Deployment",
        "Service",
    ]
    (deploy,) = objects_of(plan, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p6e-gb300.36xlarge"}
    assert pod["tolerations"] == [{"operator": "Exists", "key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    (server,) = pod["containers"]
    # The node pool's serverResources, all of it: the pod's one GPU container.
    assert server["resources"] == {
        "requests": {"cpu": "128", "memory": "800Gi"},
        "limits": {"cpu": "128", "memory": "800Gi", "nvidia.com/gpu": 4},
    }
    assert "securityContext" not in server
    startup, ready = server["startupProbe"], server["readinessProbe"]
    assert startup["httpGet"] == ready["httpGet"] == {"path": "/health", "port": 30000}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600  # hundreds of GB to load
    assert "livenessProbe" not in server
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}
    assert volumes["model-cache"]["persistentVolumeClaim"] == {"claimName": "gb300-lowlat-model-cache"}
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert mounts == {
        "/dev/shm": "dshm",
        "/root/.cache/huggingface": "model-cache",
        "/etc/flashfleet/hf-token": "hf-token",
    }
    # The shared cache is filled once by the Job, so the pod downloads nothing itself.
    assert "initContainers" not in pod
    (job,) = objects_of(plan, "Job")
    jobs = job["spec"]["template"]["spec"]["containers"]
    assert [c["command"] for c in jobs] == [download_argv("zai-org/GLM-5.3-Flash")]
    (claim,) = objects_of(plan, "PersistentVolumeClaim")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "fsx-lustre",
        "resources": {"requests": {"storage": "2Ti"}},
    }
    (svc,) = objects_of(plan, "Service")
    assert svc["spec"]["selector"] == {
        "app.kubernetes.io/instance": "gb300-lowlat",
        "flashfleet.dev/endpoint": "true",
    }
    assert deploy["spec"]["template"]["metadata"]["labels"]["flashfleet.dev/endpoint"] == "true"
    assert plan.endpoint == "http://gb300-lowlat.glm.svc:30000/v1"
    assert plan.workloads == ("gb300-lowlat-serve",)


def test_mi355x_agentx() -> None:
    plan = MI355X_AGENTX.plan()
    (deploy,) = objects_of(plan, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    server = pod["containers"][0]
    assert "--hicache-size" in server["command"]
    assert server["command"][server["command"].index("--hicache-size") + 1] == "180"
    assert "OneNexus/GLM-5.3-Flash-MXFP4" in server["command"]
    # Four of the node's eight GPUs, through the AMD device plugin (/dev/kfd, /dev/dri, video).
    assert server["resources"] == {
        "requests": {"cpu": "96", "memory": "1200Gi"},
        "limits": {"cpu": "96", "memory": "1200Gi", "amd.com/gpu": 4},
    }
    assert {"name": "SGLANG_USE_AITER", "value": "1"} in server["env"]
    assert pod["nodeSelector"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI355X"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert volumes["model-cache"]["hostPath"] == {"path": "/mnt/nvme/hf-cache", "type": "DirectoryOrCreate"}
    # A host path is per node: the pod fills it before the server starts, and there is no Job.
    install, download = pod["initContainers"]
    assert install["name"] == "weights-client"
    assert install["command"] == download_argv(None)
    assert download["command"] == download_argv("OneNexus/GLM-5.3-Flash-MXFP4")
    assert "restartPolicy" not in download
    assert volumes["hf-client"] == {"name": "hf-client", "emptyDir": {}}
    assert objects_of(plan, "Job") == []
    assert objects_of(plan, "PersistentVolumeClaim") == []
    assert plan.weights_job is None


def test_pd_one_pod_sidecars_before_router() -> None:
    plan = GB300_PD.plan()
    (deploy,) = objects_of(plan, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    # prefill and decode are native sidecars: the kubelet starts the router after their startup probes.
    assert [c["name"] for c in pod["initContainers"]] == ["prefill", "decode"]
    assert all(c["restartPolicy"] == "Always" for c in pod["initContainers"])
    assert [c["name"] for c in pod["containers"]] == ["router"]
    by_name = containers(pod)
    # Two GPUs of the pod's four each: half the pool's serverResources each.
    half = {"cpu": "64", "memory": "400Gi"}
    for name in ("prefill", "decode"):
        assert by_name[name]["resources"] == {"requests": half, "limits": {**half, "nvidia.com/gpu": 2}}
    assert by_name["router"]["resources"] == resources.ROUTER
    assert "--base-gpu-id" not in by_name["decode"]["command"]  # the container's GPUs start at 0
    for name, port in (("prefill", 31000), ("decode", 32000), ("router", 30000)):
        assert by_name[name]["startupProbe"]["httpGet"] == {"path": "/health", "port": port}
    assert (
        by_name["router"]["startupProbe"]["failureThreshold"]
        < by_name["prefill"]["startupProbe"]["failureThreshold"]
    )
    (svc,) = objects_of(plan, "Service")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 30000, "targetPort": 30000, "protocol": "TCP"}]


def test_encoder_ready_before_language_sharing_gpus_through_dra() -> None:
    plan = GB300_ENCODER.plan()
    (template,) = objects_of(plan, "ResourceClaimTemplate")
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}
    (deploy,) = objects_of(plan, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "gb300-encoder-gpus"}]
    (encoder,) = pod["initContainers"]
    (language,) = pod["containers"]
    assert encoder["name"] == "encoder"
    assert encoder["restartPolicy"] == "Always"
    assert encoder["startupProbe"]["httpGet"] == {"path": "/health", "port": 30001}
    assert language["name"] == "language"
    assert "http://localhost:30001" in language["command"]  # same pod: localhost is the encoder
    half = {"cpu": "64", "memory": "400Gi"}  # both processes on the same four GPUs
    for c in (encoder, language):
        assert c["resources"] == {"claims": [{"name": "gpus"}], "requests": half, "limits": half}


def test_encoder_without_dra_is_refused() -> None:
    pools = {"gb300": {"nodeSelector": {"a": "b"}, "serverResources": POOLS["gb300"]["serverResources"]}}
    case = Case(
        "gb300-encoder", "gb300", "low-latency", topology="encoder-disagg", source=source(nodePools=pools)
    )
    with pytest.raises(KubernetesRenderError, match="gpuDeviceClass"):
        case.plan()


def test_l3_mooncake_objects_and_leader_worker_set() -> None:
    plan = H200_L3.plan()
    kinds = [o["kind"] for o in plan.objects]
    assert kinds == [
        "Namespace",
        "PersistentVolumeClaim",
        "DaemonSet",
        "ConfigMap",
        "ConfigMap",
        "Deployment",
        "Service",
        "NetworkPolicy",
        "Job",
        "LeaderWorkerSet",
        "Service",
    ]
    (config_map,) = [
        o for o in objects_of(plan, "ConfigMap") if o["metadata"]["name"] == "h200-l3-mooncake-config"
    ]
    config = json.loads(config_map["data"]["mooncake.json"])
    assert config == {
        "master_server_address": "h200-l3-mooncake.glm.svc:50051",
        "metadata_server": "http://h200-l3-mooncake.glm.svc:8080/metadata",
        "protocol": "efa",
        "device_name": "",
        "global_segment_size": "256gb",
    }
    master = next(o for o in objects_of(plan, "Deployment") if o["metadata"]["name"] == "h200-l3-mooncake")
    (master_c,) = master["spec"]["template"]["spec"]["containers"]
    assert master_c["command"] == [
        "mooncake_master",
        "--rpc_port=50051",
        "--enable_http_metadata_server=true",
        "--http_metadata_server_host=0.0.0.0",
        "--http_metadata_server_port=8080",
        "--metrics_port=9003",
    ]
    assert master_c["resources"] == resources.MOONCAKE_MASTER  # no GPU for the master
    master_svc = next(o for o in objects_of(plan, "Service") if o["metadata"]["name"] == "h200-l3-mooncake")
    assert {p["name"]: p["port"] for p in master_svc["spec"]["ports"]} == {
        "rpc": 50051,
        "metadata": 8080,
        "metrics": 9003,
    }
    assert master_svc["spec"]["selector"] == master["spec"]["selector"]["matchLabels"]

    (lws,) = objects_of(plan, "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    i = leader["command"].index("--dist-init-addr")
    assert leader["command"][i : i + 6] == [
        "--dist-init-addr",
        "h200-l3-serve-0.h200-l3-serve.glm:5000",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
    ]
    assert worker["command"][worker["command"].index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    # Only rank 0 serves HTTP; workers run schedulers only.
    assert "readinessProbe" in leader
    assert "startupProbe" not in worker
    assert "ports" not in worker
    for c in (leader, worker):
        assert c["resources"] == {
            "requests": {"cpu": "180", "memory": "1800Gi"},
            "limits": {"cpu": "180", "memory": "1800Gi", "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 16},
        }
        assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert {"name": MOONCAKE_CONFIG_ENV, "value": MOONCAKE_CONFIG_PATH} in c["env"]
        assert {"name": MOONCAKE_HOSTNAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c[
            "env"
        ]
        mount = next(m for m in c["volumeMounts"] if m["name"] == "mooncake-config")
        assert mount == {"name": "mooncake-config", "mountPath": "/etc/flashfleet/mooncake", "readOnly": True}
    volume = next(v for v in lwt["leaderTemplate"]["spec"]["volumes"] if v["name"] == "mooncake-config")
    assert volume["configMap"] == {
        "name": "h200-l3-mooncake-config",
        "items": [{"key": "mooncake.json", "path": "mooncake.json"}],
    }
    assert plan.workloads == ("h200-l3-serve",)


def test_statefulsets_per_rank_without_the_lws_crd() -> None:
    plan = H200_L3_STATEFULSETS.plan()
    sets = objects_of(plan, "StatefulSet")
    assert [s["metadata"]["name"] for s in sets] == [f"h200-l3-sts-serve-rank-{r}" for r in range(3)]
    assert plan.workloads == tuple(s["metadata"]["name"] for s in sets)
    headless = next(o for o in objects_of(plan, "Service") if o["metadata"]["name"] == "h200-l3-sts-serve")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    for rank, sts in enumerate(sets):
        assert sts["spec"]["serviceName"] == "h200-l3-sts-serve"
        (c,) = sts["spec"]["template"]["spec"]["containers"]
        assert c["command"] == list(plan.launches[rank].argv)  # literal: no placeholder needed
        assert c["command"][c["command"].index("--dist-init-addr") + 1] == (
            "h200-l3-sts-serve-rank-0-0.h200-l3-sts-serve.glm:5000"
        )
        assert c["command"][c["command"].index("--node-rank") + 1] == str(rank)
        assert ("readinessProbe" in c) == (rank == 0)
    endpoint = [s for s in sets if s["spec"]["template"]["metadata"]["labels"].get("flashfleet.dev/endpoint")]
    assert [s["metadata"]["name"] for s in endpoint] == ["h200-l3-sts-serve-rank-0"]


def test_dflash2_draft_downloaded_beside_the_target() -> None:
    plan = H200_DFLASH2.plan()
    (job,) = objects_of(plan, "Job")
    commands = [c["command"] for c in job["spec"]["template"]["spec"]["containers"]]
    assert commands == [download_argv("zai-org/GLM-5.3-Flash"), download_argv(DFLASH2_DRAFT)]


def test_read_write_once_cache_downloads_in_the_pod() -> None:
    rwo = {"kind": "pvc", "storageClass": "gp3", "size": "1500Gi", "accessMode": "ReadWriteOnce"}
    case = Case("gb300-rwo", "gb300", "low-latency", source=source(modelCache=rwo))
    plan = case.plan()
    assert objects_of(plan, "Job") == []
    pod = objects_of(plan, "Deployment")[0]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["weights-client", "weights-zai-org-glm-5-3-flash"]


def test_read_write_once_cache_refused_for_several_nodes() -> None:
    rwo = {"kind": "pvc", "storageClass": "gp3", "size": "1500Gi", "accessMode": "ReadWriteOnce"}
    case = Case("h200-two", "h200", "low-latency", nodes=2, source=source(modelCache=rwo))
    with pytest.raises(KubernetesRenderError, match="ReadWriteMany"):
        case.plan()


def test_derived_image_refused() -> None:
    with pytest.raises(KubernetesRenderError, match=r"image\.derived"):
        plan_kubernetes(
            "gb300-lowlat",
            source(),
            hardware="gb300",
            nodes=1,
            recipe_for=GB300_LOWLAT.recipe_for,
            settings=LaunchSettings(image=ImageSpec()),
        )


def test_missing_node_pool_refused() -> None:
    case = Case("gb300-lowlat", "gb300", "low-latency", source=source(nodePools={"h200": POOLS["h200"]}))
    with pytest.raises(KubernetesRenderError, match="no node pool for gb300"):
        case.plan()


def test_l3_without_rdma_resources_refused() -> None:
    pools = {"h200": {"nodeSelector": {"a": "b"}, "serverResources": POOLS["h200"]["serverResources"]}}
    case = Case(
        "h200-l3",
        "h200",
        "low-latency",
        options={"hicache": "l1l2l3"},
        mooncake=H200_L3.mooncake,
        source=source(nodePools=pools),
    )
    with pytest.raises(KubernetesRenderError, match="rdmaResources"):
        case.plan()


def test_l3_without_mooncake_section_refused() -> None:
    case = Case("h200-l3", "h200", "low-latency", options={"hicache": "l1l2l3"})
    with pytest.raises(KubernetesRenderError, match="mooncake"):
        case.plan()


def test_long_stack_name_refused() -> None:
    case = Case("x" * 37, "gb300", "low-latency")
    with pytest.raises(KubernetesRenderError, match="at most 36"):
        case.plan()


def test_no_namespace_object_when_it_exists() -> None:
    case = Case("gb300-lowlat", "gb300", "low-latency", source=source(createNamespace=False))
    assert objects_of(case.plan(), "Namespace") == []


# an IANA service name, which a port name must be: 1-15 characters, a letter among them, no
# hyphen at either end nor two in a row
IANA_NAME = re.compile(r"^(?=.{1,15}$)(?=.*[a-z])(?!.*--)[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _port_names(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        own = [p["name"] for p in obj.get("ports") or [] if isinstance(p, dict) and "name" in p]
        return own + [n for v in obj.values() for n in _port_names(v)]
    if isinstance(obj, list):
        return [n for v in obj for n in _port_names(v)]
    return []


@pytest.mark.parametrize(
    "case", [*ALL, GB300_TP16, H200_LWS, MI355X_LWS, GB300_PD_LWS], ids=lambda c: c.stack
)
def test_every_port_name_is_an_iana_service_name(case: Case) -> None:
    """The LeaderWorkerSet CRD's schema does not check its templates' port names; the StatefulSet
    its controller makes of them is refused (a rank's `prefill-0-rank-0` cut at 15 characters
    ended in a hyphen), and the set never makes a pod."""
    names = _port_names(list(case.plan().objects))
    assert names
    assert [n for n in names if not IANA_NAME.match(n)] == []
