"""Strategies and topologies as data: what each one changes in the option defaults and
which fixed flags its published command carries.

Option defaults are layered: hardware (catalog) -> strategy -> topology -> user overrides.
Each topology's layer is exactly what its published command differs by, so that rendering a
topology with no overrides reproduces that command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flashfleet.catalog import Hardware

STRATEGIES: dict[str, dict[str, Any]] = {
    # MTP through EAGLE 5/1/6 with tensor parallelism.
    "low-latency": {"speculative": "eagle"},
    # No --speculative-* flag at all: no draft-and-verify overhead under sustained batches.
    "high-throughput": {"speculative": "off"},
}


@dataclass(frozen=True)
class EagleShape:
    steps: int
    topk: int
    draft_tokens: int


MTP_5_1_6 = EagleShape(5, 1, 6)


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    source: str
    defaults: Callable[[Hardware], dict[str, Any]] = field(default=lambda hw: {})
    eagle: EagleShape = MTP_5_1_6
    moe_runner_backend: str | None = None  # overrides the hardware's when set
    single_node: bool = True


TOPOLOGIES: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology(
            "unified",
            "one server process per node (multi-node tensor parallel when nodes > 1)",
            "seed: Deployment panel",
            single_node=False,
        ),
        Topology(
            "encoder-disagg",
            "encoder-only server (:30001, started first) + language-only server (:30000)",
            "seed 3.4 Encoder disaggregation (encoder and language server commands, GB300)",
            # The published language server runs BF16 KV + TileLang DSA, EAGLE 3/1/4, no parsers,
            # and caps running requests at 64.
            defaults=lambda hw: {
                "kv_dsa": "bf16-tilelang",
                "reasoning_parser": "off",
                "tool_call_parser": "off",
                "max_running_requests": 64,
            },
            eagle=EagleShape(3, 1, 4),
        ),
        Topology(
            "prefill-cp",
            "one server with prefill context parallelism (interleave) over the TP group",
            "seed 3.5 Prefill Context Parallelism (Blackwell command)",
        ),
        Topology(
            "pd",
            "prefill (GPUs 0..tp-1, :31000) + decode (next tp GPUs, :32000) + router (:30000)",
            "seed 3.6 PD disaggregation (prefill, decode and router commands, 4x GB300)",
            # The validated PD arm: TP2 per role, BF16 KV + TileLang DSA, triton MoE, no parsers.
            defaults=lambda hw: {
                "kv_dsa": "bf16-tilelang",
                "reasoning_parser": "off",
                "tool_call_parser": "off",
                "tp": hw.gpus_per_node // 2,
            },
            moe_runner_backend="triton",
        ),
    )
}

# Fixed ports and GPU layout of the published topologies.
SERVE_PORT = 30000
ENCODER_PORT = 30001
PD_PREFILL_PORT = 31000
PD_DECODE_PORT = 32000
PD_BOOTSTRAP_PORT = 8998


def api_base(host: str, port: int = SERVE_PORT) -> str:
    """The endpoint a stack hands its clients: the OpenAI-compatible base URL (`.../v1`)."""
    return f"http://{host}:{port}/v1"


def server_root(base: str) -> str:
    """The server behind an endpoint: what /health and SGLang's own benchmark are given."""
    return base.rstrip("/").removesuffix("/v1")


# Distinct NCCL ports for the two PD roles sharing a node (seed operational note).
PD_PREFILL_NCCL_PORT = 31500
PD_DECODE_NCCL_PORT = 32500
DIST_INIT_PORT = 5000
LANGUAGE_MEM_FRACTION = "0.78"
# Single-node NIXL goes over loopback UCX transports (seed operational note).
PD_NIXL_ENV = {"UCX_NET_DEVICES": "lo", "UCX_TLS": "tcp,cuda_copy,cuda_ipc,self,sm"}
# A cluster (replicas or PD across nodes): the router is the endpoint on SERVE_PORT, so a replica
# worker serves on its own port, even on a node without the router (one port for every worker).
WORKER_PORT = 31000
# peer_load: the weights send group's ports on the seed replica's node, one per TP rank (sglang's
# --remote-instance-weight-loader-send-weights-group-ports wants exactly tp of them).
PEER_LOAD_PORT = 31600
# peer_load=on: the seed replica's engine-info bootstrap server (sglang's default, named so that
# planning's port checks see it), where each TP rank publishes its TransferEngine session.
ENGINE_INFO_BOOTSTRAP_PORT = 6789
# PD across nodes over Mooncake on the NVLink fabric of GB200/GB300 (sglang docs,
# advanced_features/pd_disaggregation.md). NIXL across nodes takes no loopback UCX settings.
MOONCAKE_MNNVL_ENV = {"SGLANG_MOONCAKE_CUSTOM_MEM_POOL": "True", "MC_FORCE_MNNVL": "True"}
MOONCAKE_CONFIG_PATH = "/etc/flashfleet/mooncake/mooncake.json"
MOONCAKE_CONFIG_ENV = "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"
