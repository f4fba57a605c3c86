"""Inventories in flashfleet.inventory's shape, for hosts the tests own: this machine through
`ansible_connection: local`, or a loopback port nothing listens on (an unreachable node)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

from flashfleet.catalog import node_packages
from flashfleet.inventory import weights_client_facts
from flashfleet.launch import ContainerLaunch

TOKEN = "hf_bringupTESTtoken0123456789abcdefXYZ"
PROJECT = Path(__file__).parent / "project"


def facts(stack: str, index: int, cache_dir: Path, argv: list[str] | None = None) -> dict[str, Any]:
    return {
        "flashfleet_stack": stack,
        "flashfleet_hardware": "h200",
        "flashfleet_vendor": "nvidia",
        "flashfleet_arch": "x86_64",
        "flashfleet_gpu_node": True,
        "flashfleet_gpu_count": 8,
        "flashfleet_gpu_model": "H200",
        "flashfleet_imex_nodes": [],  # H200: no IMEX
        "flashfleet_host_memory_gb": 2048,
        "flashfleet_hicache_host_gb": 0,
        "flashfleet_node_index": index,
        "flashfleet_model": "zai-org/GLM-5.3-Flash",
        "flashfleet_draft_model": None,
        "flashfleet_image": "lmsysorg/sglang:v0.5.23",
        "flashfleet_model_cache_dir": str(cache_dir),
        "flashfleet_weights_client": weights_client_facts(),
        "flashfleet_node_packages": node_packages().versions(),
        "flashfleet_mooncake": False,
        "flashfleet_processes": [
            launch(argv or ["sglang", "serve", "--model-path", "zai-org/GLM-5.3-Flash"])
        ],
        "flashfleet_reasoning": True,
        "flashfleet_tool_calls": True,
        "flashfleet_api_port": 30000,
    }


def launch(argv: list[str]) -> dict[str, Any]:
    """One container launch as flashfleet.launch dumps it (the test roles read only its argv)."""
    return ContainerLaunch.of(
        name="serve", role="server", node=0, container_name="flashfleet-serve", image="lmsysorg/sglang:v0.5.23",
        argv=tuple(argv), env={}, env_file="", secret_env_names=(), vendor="nvidia", gpus=(0,), devices=(),
        group_add=(), security_opt=(), cap_add=(), shm_size="32g", ulimits={}, mounts=(), port=30000, start_after=(),
    ).model_dump(mode="json")  # fmt: skip


def local_host() -> dict[str, Any]:
    return {
        "ansible_host": "127.0.0.1",
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
    }


def closed_loopback_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable_host() -> dict[str, Any]:
    return {
        "ansible_host": "127.0.0.1",
        "ansible_port": closed_loopback_port(),
        "ansible_connection": "ssh",
        "ansible_user": "ubuntu",
        "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes -o StrictHostKeyChecking=no "
        "-o UserKnownHostsFile=/dev/null",
    }


def inventory(
    stack: str, hosts: dict[str, tuple[dict[str, Any], Path]], argv: list[str] | None = None
) -> dict[str, Any]:
    """hosts: name -> (connection vars, cache dir)."""
    hostvars = {
        name: {**conn, **facts(stack, i, cache, argv)}
        for i, (name, (conn, cache)) in enumerate(hosts.items())
    }
    members: dict[str, dict[str, Any]] = {h: {} for h in hostvars}
    return {
        "all": {
            "hosts": hostvars,
            "children": {
                "flashfleet": {"hosts": dict(members)},
                "vendor_nvidia": {"hosts": dict(members)},
                "hw_h200": {"hosts": dict(members)},
            },
        }
    }
