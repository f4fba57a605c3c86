"""One container launch -> one Kubernetes container spec.

The container carries the launch's image, argv (as ``command``) and environment as they are;
everything else the launch says is translated, and anything it says that has no translation here
is refused rather than dropped:

- GPUs: a ``nvidia.com/gpu`` / ``amd.com/gpu`` limit of the process's GPU count (the device
  plugin gives the container exactly those GPUs, numbered from 0, as ``--gpus`` does), or a shared
  DRA claim when processes of one pod share GPUs.
- ``/dev/kfd``, ``/dev/dri`` and the ``video`` group: the AMD device plugin provides them with the
  ``amd.com/gpu`` limit. ``/dev/infiniband``: the node pool's RDMA resources.
- Shared memory: a memory emptyDir at ``/dev/shm`` (the pod's containers share one IPC namespace,
  which is what ``--ipc host`` gives the PD roles). Host networking: pod networking and Services.
- Mounts: by their target in the container (the Hugging Face cache, the Mooncake config).
- Secrets: never an environment value. The stack's Secret is a read-only file volume and each
  secret variable becomes the variable naming its file (``HF_TOKEN`` -> ``HF_TOKEN_PATH``, which
  huggingface_hub reads, as the host roles hand the download client its token): an environment
  value is inherited by every process the server starts and readable in its /proc environ.
- CPU and memory: requests and limits for every container (``flashfleet.k8s.resources``).
- Capabilities: see ``_security_context``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flashfleet.k8s import resources
from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.k8s.pod_security import restricted
from flashfleet.launch import CONTAINER_HF_CACHE, MOONCAKE_CONFIG_DIR, ContainerLaunch
from flashfleet.stack.kubernetes_source import ServerResources

GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
# What the GPU device plugin of each vendor already hands the container.
_DEVICE_PLUGIN_DEVICES = {"nvidia": frozenset(), "amd": frozenset({"/dev/kfd", "/dev/dri"})}
_DEVICE_PLUGIN_GROUPS = {"nvidia": frozenset(), "amd": frozenset({"video"})}
RDMA_DEVICE = "/dev/infiniband"
_DEBUG_CAPABILITIES = frozenset({"SYS_PTRACE"})

SHM_VOLUME = "dshm"
CACHE_VOLUME = "model-cache"
MOONCAKE_VOLUME = "mooncake-config"
VOLUME_BY_TARGET = {CONTAINER_HF_CACHE: CACHE_VOLUME, MOONCAKE_CONFIG_DIR: MOONCAKE_VOLUME}

# The stack's Secret as files: one per key, named after it, readable by the container's user only.
TOKEN_VOLUME = "hf-token"
TOKEN_DIR = "/etc/flashfleet/hf-token"
# The variable that names each secret's file, for the clients that read it (huggingface_hub).
TOKEN_FILE_ENV = {"HF_TOKEN": "HF_TOKEN_PATH"}
TOKEN_MOUNT = {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True}

# Mooncake's store client announces this address to its peers. One ConfigMap serves every pod,
# so each pod's own IP comes from the downward API: SGLang reads this variable before the
# config file's local_hostname.
MOONCAKE_HOSTNAME_ENV = "MOONCAKE_LOCAL_HOSTNAME"

HEALTH_PATH = "/health"
PROBE_PERIOD_S = 10
# Loading several hundred GB from the cache, then JIT kernels and CUDA graph capture: two hours
# before the kubelet gives up on a model server.
SERVER_STARTUP_S = 2 * 3600
ROUTER_STARTUP_S = 10 * 60
# /health runs a one-token generation with a 20 s timeout of its own.
HEALTH_TIMEOUT_S = 30


@dataclass(frozen=True)
class PodResources:
    """What a pod's containers draw on besides their own launch."""

    secret_name: str
    vendor: str
    server: ServerResources  # the node pool's serverResources, shared by a pod's GPU containers
    gpu_claim: str | None = None  # DRA claim shared by the pod's GPU processes
    rdma_resources: dict[str, int] = field(default_factory=dict)
    rdma_required: bool = False  # the Mooncake transport pins RDMA memory (rdma/efa)
    mooncake_l3: bool = False


def _http_probes(launch: ContainerLaunch) -> dict[str, Any]:
    budget = ROUTER_STARTUP_S if launch.role == "router" else SERVER_STARTUP_S
    get = {"path": HEALTH_PATH, "port": launch.port}
    return {
        "startupProbe": {
            "httpGet": get,
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": budget // PROBE_PERIOD_S,
        },
        # No liveness probe: /health generates a token and slows under full load, and a restart
        # reloads the whole checkpoint; a crashed server exits and the kubelet restarts it.
        "readinessProbe": {
            "httpGet": get,
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": 3,
        },
    }


def token_volume(secret_name: str) -> dict[str, Any]:
    """The stack's Secret as read-only files (optional: a stack without a token still starts,
    ungated repositories download anonymously, and the file is then absent)."""
    return {
        "name": TOKEN_VOLUME,
        "secret": {"secretName": secret_name, "optional": True, "defaultMode": 0o400},
    }


def token_env(secret_names: tuple[str, ...], who: str) -> list[dict[str, Any]]:
    """For each secret variable, the variable naming its file in the token volume."""
    env = []
    for name in secret_names:
        if name not in TOKEN_FILE_ENV:
            raise KubernetesRenderError("launch", f"{who}: no file form for the secret {name}")
        env.append({"name": TOKEN_FILE_ENV[name], "value": f"{TOKEN_DIR}/{name}"})
    return env


def env_list(launch: ContainerLaunch, res: PodResources) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in launch.env.items()]
    env += token_env(launch.secret_env_names, launch.name)
    if res.mooncake_l3 and launch.mounts:
        env.append({"name": MOONCAKE_HOSTNAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    return env


def _resources(launch: ContainerLaunch, res: PodResources, pod_gpus: int) -> dict[str, Any]:
    sized = resources.server(res.server, len(launch.gpus), pod_gpus) if launch.gpus else resources.ROUTER
    out: dict[str, Any] = {"requests": dict(sized["requests"])}
    limits: dict[str, Any] = dict(sized["limits"])
    if launch.gpus:
        if res.gpu_claim:
            out["claims"] = [{"name": res.gpu_claim}]
        else:
            limits[GPU_RESOURCES[launch.vendor]] = len(launch.gpus)
    extra_devices = set(launch.devices) - _DEVICE_PLUGIN_DEVICES[launch.vendor]
    if RDMA_DEVICE in extra_devices:
        extra_devices.discard(RDMA_DEVICE)
        if res.rdma_required and not res.rdma_resources:
            raise KubernetesRenderError(
                "nodes.source.nodePools.rdmaResources",
                f"{launch.name} needs {RDMA_DEVICE} for the Mooncake transport: name the node pool's "
                "RDMA device-plugin resource (e.g. vpc.amazonaws.com/efa on EKS)",
            )
        limits.update(res.rdma_resources)
    if extra_devices:
        raise KubernetesRenderError(
            "launch", f"{launch.name}: no Kubernetes translation for devices {sorted(extra_devices)}"
        )
    out["limits"] = limits
    return out


def _security_context(launch: ContainerLaunch) -> dict[str, Any] | None:
    groups = set(launch.group_add) - _DEVICE_PLUGIN_GROUPS[launch.vendor]
    if groups:
        raise KubernetesRenderError("launch", f"{launch.name}: no Kubernetes translation for groups {groups}")
    ctx: dict[str, Any] = {}
    # SYS_PTRACE (in SGLang's ROCm docker command) lets a process trace others, which only a
    # debugger (rocgdb) needs: ROCm's own container guide ("Running ROCm Docker containers")
    # grants the GPUs with /dev/kfd and /dev/dri alone. Not granted here.
    caps = [cap for cap in launch.cap_add if cap not in _DEBUG_CAPABILITIES]
    if caps:
        ctx["capabilities"] = {"add": caps}
    for opt in launch.security_opt:
        # Kept: ROCm's container guide recommends seccomp unconfined for containers in HPC
        # environments: it lets the process map memory to NUMA nodes (the GPU/CPU affinity
        # numactl sets up), for performance.
        if opt != "seccomp=unconfined":
            raise KubernetesRenderError("launch", f"{launch.name}: no Kubernetes translation for {opt}")
        ctx["seccompProfile"] = {"type": "Unconfined"}
    return ctx or None


def _volume_mounts(launch: ContainerLaunch) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if launch.secret_env_names:
        mounts.append(dict(TOKEN_MOUNT))
    for mount in launch.mounts:
        if mount.target not in VOLUME_BY_TARGET:
            raise KubernetesRenderError("launch", f"{launch.name}: no volume for the mount at {mount.target}")
        entry: dict[str, Any] = {"name": VOLUME_BY_TARGET[mount.target], "mountPath": mount.target}
        if mount.read_only:
            entry["readOnly"] = True
        mounts.append(entry)
    return mounts


def port_name(launch: ContainerLaunch) -> str:
    """An IANA service name: at most 15 characters, no hyphen at either end. A rank's launch
    (`prefill-0-rank-1`) says its rank as `-r1`: cut at 15, it ended in a hyphen, which a
    LeaderWorkerSet's CRD schema takes and the StatefulSet its controller makes is refused."""
    name = launch.name
    if len(name) > 15:
        name = name.replace("-rank-", "-r")
    return name[:15].strip("-")


def container(
    launch: ContainerLaunch,
    res: PodResources,
    *,
    serves_http: bool,
    pod_gpus: int,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """The container for one launch; ``command`` only for a worker template's rank placeholder;
    ``pod_gpus``: the GPU counts of the pod's containers, summed (its share of serverResources)."""
    argv = list(launch.argv) if command is None else command
    if any("$(" in word for word in launch.argv):
        # Kubernetes expands $(VAR) in command words: the argv would no longer be the recipe's.
        raise KubernetesRenderError("options.extra_args", f"{launch.name}: '$(' in the command")
    spec: dict[str, Any] = {
        "name": launch.name,
        "image": launch.image,
        "imagePullPolicy": "IfNotPresent",
        "command": argv,
        "env": env_list(launch, res),
        "resources": _resources(launch, res, pod_gpus),
        "volumeMounts": _volume_mounts(launch),
    }
    if launch.role == "router":  # no GPU, no device: no privilege (k8s.pod_security)
        spec["securityContext"] = restricted()
    elif (security := _security_context(launch)) is not None:
        spec["securityContext"] = security
    if serves_http:
        spec["ports"] = [{"name": port_name(launch), "containerPort": launch.port, "protocol": "TCP"}]
        spec.update(_http_probes(launch))
    return spec


def shm_size_limit(shm_size: str) -> str:
    """Docker's ``32g`` (binary units) as a Kubernetes quantity ``32Gi``."""
    units = {"g": "Gi", "m": "Mi", "k": "Ki"}
    number, unit = shm_size[:-1], shm_size[-1:].lower()
    if not number.isdigit() or unit not in units:
        raise KubernetesRenderError("launch", f"shared memory size {shm_size!r} is not <n>g, <n>m or <n>k")
    return f"{number}{units[unit]}"
