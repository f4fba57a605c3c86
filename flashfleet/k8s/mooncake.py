"""The Mooncake L3 tier on Kubernetes: master Deployment + Service, and the config as a ConfigMap.

The master runs ``mooncake_master`` with its HTTP metadata server, so no separate metadata
service is needed. The config file is mounted where ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH``
(in the launch's environment) points; each pod announces its own IP through
``MOONCAKE_LOCAL_HOSTNAME``, so the shared file carries no local_hostname.

None of the master's ports authenticates (the metadata port reads and rewrites the transfer
engine's segment records, the RPC port puts and evicts objects): a NetworkPolicy admits them
only from the stack's own server pods, by flashfleet's labels. It binds where the cluster's
network plugin enforces NetworkPolicy.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from flashfleet.k8s import names, resources
from flashfleet.k8s.pod_security import restricted
from flashfleet.recipes.layouts import MOONCAKE_CONFIG_PATH
from flashfleet.stack.spec import Mooncake

CONFIG_KEY = posixpath.basename(MOONCAKE_CONFIG_PATH)


def master_address(stack: str, namespace: str) -> str:
    return f"{names.mooncake_master(stack)}.{namespace}.svc"


def config(stack: str, namespace: str, spec: Mooncake) -> dict[str, Any]:
    host = master_address(stack, namespace)
    return {
        "master_server_address": f"{host}:{spec.rpc_port}",
        "metadata_server": f"http://{host}:{spec.metadata_port}/metadata",
        "protocol": spec.protocol,
        "device_name": ",".join(spec.devices),
        # "gb" is GiB to SGLang; it divides the segment among the node's ranks.
        "global_segment_size": f"{spec.global_segment_gib}gb",
    }


def master_argv(spec: Mooncake) -> list[str]:
    return [
        "mooncake_master",
        f"--rpc_port={spec.rpc_port}",
        "--enable_http_metadata_server=true",
        "--http_metadata_server_host=0.0.0.0",
        f"--http_metadata_server_port={spec.metadata_port}",
        f"--metrics_port={spec.metrics_port}",
    ]


def objects(
    stack: str, namespace: str, spec: Mooncake, image: str, placement: dict[str, Any]
) -> list[dict[str, Any]]:
    """ConfigMap, master Deployment, its Service and the NetworkPolicy in front of it.

    The master runs from the serving image (which ships the Mooncake wheel), on the GPU pool's
    nodes where that image is already pulled; it asks for no GPU.
    """
    lbl = names.labels(stack, "mooncake-master")
    sel = names.selector(stack, "mooncake-master")
    ports = [
        ("rpc", spec.rpc_port),
        ("metadata", spec.metadata_port),
        ("metrics", spec.metrics_port),
    ]
    cfg = names.mooncake_config(stack)
    master = names.mooncake_master(stack)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": names.metadata(cfg, namespace, names.labels(stack, "mooncake-config")),
            "data": {CONFIG_KEY: json.dumps(config(stack, namespace, spec), indent=2, sort_keys=True)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": names.metadata(master, namespace, lbl),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": sel},
                "template": {
                    "metadata": {"labels": {**lbl, **sel}},
                    "spec": {
                        "containers": [
                            {
                                "name": "mooncake-master",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "command": master_argv(spec),
                                "ports": [
                                    {"name": n, "containerPort": p, "protocol": "TCP"} for n, p in ports
                                ],
                                "readinessProbe": {
                                    "tcpSocket": {"port": spec.rpc_port},
                                    "periodSeconds": 5,
                                },
                                "resources": resources.MOONCAKE_MASTER,
                                "securityContext": restricted(),
                            }
                        ],
                        "automountServiceAccountToken": False,
                        **placement,
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": names.metadata(master, namespace, lbl),
            "spec": {
                "type": "ClusterIP",
                "selector": sel,
                "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": names.metadata(master, namespace, lbl),
            "spec": {
                "podSelector": {"matchLabels": sel},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [{"podSelector": {"matchLabels": clients(stack)}}],
                        "ports": [{"port": p, "protocol": "TCP"} for _, p in ports],
                    }
                ],
            },
        },
    ]


def clients(stack: str) -> dict[str, str]:
    """The pods that may reach the master: the stack's model servers (every rank)."""
    serve = names.labels(stack, "serve")
    return {key: serve[key] for key in (names.LABEL_NAME, names.LABEL_INSTANCE, names.LABEL_COMPONENT)}
