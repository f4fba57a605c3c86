"""CPU and memory requests and limits of every container the Kubernetes source renders.

A container without a memory limit can take its node's memory from the model servers beside it;
one without requests is scheduled as if it used nothing. So every container has both:

- Model servers (containers with GPUs): the node pool's ``serverResources`` (what one server pod
  may use of its node; the cluster's node shape is not known offline), split among the pod's GPU
  containers by their GPU count. Request = limit: the scheduler places the pod only where that
  much is free, and the kubelet never takes it back under pressure.
- Everything else runs no model and gets small fixed figures, each with its reason below. A
  process over its memory limit is killed and restarted by the kubelet; the figures leave room
  several times over what the process is expected to hold.
"""

from __future__ import annotations

from typing import Any

from flashfleet.stack.kubernetes_source import ServerResources


def _fixed(cpu_request: str, memory_request: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    return {
        "requests": {"cpu": cpu_request, "memory": memory_request},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }


# The PD router proxies HTTP between the clients, prefill and decode: no model, no cache.
ROUTER = _fixed("1", "1Gi", "8", "8Gi")
# pip installing one pure-Python package (huggingface_hub and its few dependencies).
CLIENT_INSTALL = _fixed("100m", "256Mi", "1", "1Gi")
# `hf download` streams each file to the cache in chunks with --max-workers threads; its page
# cache counts against the limit, and the kernel reclaims it there rather than killing the process.
DOWNLOAD = _fixed("500m", "512Mi", "2", "4Gi")
# The Mooncake master keeps object keys and replica locations; the cached KV itself lives in the
# servers' global segments, in their pods' memory.
MOONCAKE_MASTER = _fixed("1", "1Gi", "4", "8Gi")
# The pre-pull DaemonSet runs `true` and the pause binary: a few MiB at most.
PRE_PULL = _fixed("10m", "16Mi", "100m", "64Mi")


def server(pool: ServerResources, gpus: int, pod_gpus: int) -> dict[str, Any]:
    """One GPU container's share of the pod's ``serverResources`` (``gpus`` of ``pod_gpus``)."""
    milli = pool.cpu * 1000 * gpus // pod_gpus
    mib = pool.memory_gib * 1024 * gpus // pod_gpus
    cpu = str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    memory = f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"
    both = {"cpu": cpu, "memory": memory}
    return {"requests": dict(both), "limits": dict(both)}
