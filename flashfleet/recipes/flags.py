"""How option values become `sglang serve` flags. Pure functions of the effective options."""

from __future__ import annotations

from flashfleet.catalog import CHECKPOINTS, DFLASH2_DRAFT, Hardware
from flashfleet.recipes.layouts import (
    ENGINE_INFO_BOOTSTRAP_PORT,
    MOONCAKE_CONFIG_ENV,
    MOONCAKE_CONFIG_PATH,
    PEER_LOAD_PORT,
    Topology,
)
from flashfleet.recipes.options import Options

# kv_dsa -> (--kv-cache-dtype, DSA backend for both prefill and decode)
KV_DSA: dict[str, tuple[str, str]] = {
    "fp8-trtllm": ("fp8_e4m3", "trtllm"),
    "bf16-tilelang": ("bfloat16", "tilelang"),
    "fp8-tilelang": ("fp8_e4m3", "tilelang"),
}

# Flags that a typed option (or the topology) owns; extra_args may not set them a second way.
FLAG_OWNERS: dict[str, str] = {
    **dict.fromkeys(["--model-path", "--model", "--tokenizer-path"], "precision/checkpoint"),
    **dict.fromkeys(["--tp-size", "--tensor-parallel-size", "--tp"], "tp"),
    **dict.fromkeys(
        [
            "--kv-cache-dtype",
            "--dsa-prefill-backend",
            "--dsa-decode-backend",
            "--nsa-prefill-backend",
            "--nsa-decode-backend",
        ],
        "kv_dsa",
    ),
    "--mm-feature-transport": "mm_transport",
    "--cuda-graph-backend-prefill": "breakable_cuda_graph",
    **dict.fromkeys(
        ["--enable-hierarchical-cache", "--enable-hicache", "--hicache-storage-backend"], "hicache"
    ),
    "--hicache-size": "hicache_size",
    **dict.fromkeys(
        [
            "--speculative-algorithm",
            "--speculative-num-steps",
            "--speculative-eagle-topk",
            "--speculative-num-draft-tokens",
            "--speculative-draft-model-path",
            "--speculative-draft-model",
            "--speculative-draft-attention-backend",
        ],
        "speculative",
    ),
    "--reasoning-parser": "reasoning_parser",
    "--tool-call-parser": "tool_call_parser",
    **dict.fromkeys(["--enable-dp-attention", "--dp-size", "--data-parallel-size"], "dp_attention"),
    "--mamba-full-memory-ratio": "mamba_full_memory_ratio",
    "--max-mamba-cache-size": "max_mamba_cache_size",
    "--max-running-requests": "max_running_requests",
    **dict.fromkeys(
        ["--weight-loader-prefetch-checkpoints", "--weight-loader-prefetch-num-threads"], "weight_prefetch"
    ),
    **dict.fromkeys(
        [
            "--load-format",
            "--remote-instance-weight-loader-seed-instance-ip",
            "--remote-instance-weight-loader-seed-instance-service-port",
            "--remote-instance-weight-loader-send-weights-group-ports",
            "--remote-instance-weight-loader-backend",
            "--remote-instance-weight-loader-start-seed-via-transfer-engine",
            "--engine-info-bootstrap-port",
        ],
        "peer_load",
    ),
    **dict.fromkeys(
        ["--weight-cache-mode", "--weight-cache-socket", "--weight-cache-timeout"], "weight_cache"
    ),
    **dict.fromkeys(["--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr"], "nodes"),
    **dict.fromkeys(
        [
            "--host",
            "--port",
            "--nccl-port",
            "--base-gpu-id",
            "--disaggregation-mode",
            "--disaggregation-bootstrap-port",
            "--disaggregation-transfer-backend",
            "--encoder-only",
            "--language-only",
            "--encoder-urls",
            "--enable-prefill-cp",
            "--attn-cp-size",
            "--cp-strategy",
        ],
        "topology",
    ),
}


def model_path(o: Options) -> str:
    return o.checkpoint or CHECKPOINTS[o.precision][0]


def kv_dsa_flags(o: Options) -> list[str]:
    dtype, backend = KV_DSA[o.kv_dsa]
    return [
        "--dsa-prefill-backend",
        backend,
        "--dsa-decode-backend",
        backend,
        "--kv-cache-dtype",
        dtype,
    ]


def moe_flags(hw: Hardware, topo: Topology) -> list[str]:
    backend = topo.moe_runner_backend or hw.moe_runner_backend
    return ["--moe-runner-backend", backend] if backend else []


def speculative_flags(o: Options, topo: Topology) -> list[str]:
    if o.speculative == "eagle":
        e = topo.eagle
        return [
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            str(e.steps),
            "--speculative-eagle-topk",
            str(e.topk),
            "--speculative-num-draft-tokens",
            str(e.draft_tokens),
        ]
    if o.speculative == "dflash2":
        # Block size comes from the draft checkpoint; the draft runs on FA4, not the DSA backends.
        return [
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-draft-model-path",
            DFLASH2_DRAFT,
            "--speculative-draft-attention-backend",
            "fa4",
        ]
    return []


def memory_flags(o: Options) -> list[str]:
    out: list[str] = []
    if o.max_running_requests is not None:
        out += ["--max-running-requests", str(o.max_running_requests)]
    if o.mamba_full_memory_ratio is not None:
        out += ["--mamba-full-memory-ratio", f"{o.mamba_full_memory_ratio:g}"]
    if o.max_mamba_cache_size is not None:
        out += ["--max-mamba-cache-size", str(o.max_mamba_cache_size)]
    return out


def loader_flags(o: Options) -> list[str]:
    if o.weight_prefetch == "off":
        return []
    out = ["--weight-loader-prefetch-checkpoints"]
    if o.weight_prefetch_threads is not None:
        out += ["--weight-loader-prefetch-num-threads", str(o.weight_prefetch_threads)]
    return out


# Where the daemon and the server meet: a folder on the model cache volume, which every container
# of the node mounts at the same path, instead of SGLang's default /tmp (each container's own).
# SGLang keys each socket by the GPU's UUID ({device_uuid} must stay in the template); the path
# stays short, under the 107 bytes a Unix socket path may hold.
WEIGHT_CACHE_DIR = "/root/.cache/huggingface/.wc"


def weight_cache_flags(o: Options) -> list[str]:
    return [] if o.weight_cache == "off" else ["--weight-cache-mode", o.weight_cache]


def weight_cache_env(o: Options) -> dict[str, str]:
    """The paths SGLang's client and the daemon must agree on (sglang/srt/environ.py)."""
    if o.weight_cache == "off":
        return {}
    return {
        "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": f"{WEIGHT_CACHE_DIR}/{{device_uuid}}.sock",
        "SGLANG_WEIGHT_CACHE_READY_TEMPLATE": f"{WEIGHT_CACHE_DIR}/{{device_uuid}}.ready",
    }


def peer_load_flags(seed_address: str, seed_port: int, tp: int, backend: str) -> list[str]:
    """A replica that loads from its seed replica: every setting the loader needs, since sglang
    quietly falls back to loading from disk when one is missing
    (sglang/srt/arg_groups/model_path_hook.py). NCCL needs the seed's send group ports, one a TP
    rank; the TransferEngine asks the seed's HTTP port for each rank's session and reads the
    weights from the seed's GPU memory itself."""
    out = [
        "--load-format",
        "remote_instance",
        "--remote-instance-weight-loader-seed-instance-ip",
        seed_address,
        "--remote-instance-weight-loader-seed-instance-service-port",
        str(seed_port),
    ]
    if backend == "nccl":
        ports = ",".join(str(PEER_LOAD_PORT + rank) for rank in range(tp))
        out += ["--remote-instance-weight-loader-send-weights-group-ports", f"[{ports}]"]
    return [*out, "--remote-instance-weight-loader-backend", backend]


def peer_seed_flags(backend: str) -> list[str]:
    """The replica the others load from over the TransferEngine: it registers its weights with
    its own engine and publishes each rank's session on its engine-info bootstrap server (one
    an instance's first node; named, so that planning's port checks see it). An NCCL seed needs
    nothing: the loader asks it to set up the send group."""
    if backend != "transfer_engine":
        return []
    return [
        "--remote-instance-weight-loader-start-seed-via-transfer-engine",
        "--engine-info-bootstrap-port",
        str(ENGINE_INFO_BOOTSTRAP_PORT),
    ]


def peer_load_backend(o: Options) -> str:
    """SGLang's loader backend for options.peer_load: on = the TransferEngine, nccl = NCCL."""
    return "nccl" if o.peer_load == "nccl" else "transfer_engine"


def hicache_flags(o: Options) -> list[str]:
    if o.hicache == "off":
        return []
    out = ["--enable-hierarchical-cache"]
    if o.hicache_size is not None:
        out += ["--hicache-size", str(o.hicache_size)]
    if o.hicache == "l1l2l3":
        # --enable-metrics: verify reads the L3 storage hit counters from /metrics
        out += ["--hicache-storage-backend", "mooncake", "--enable-metrics"]
    return out


def hicache_env(o: Options) -> dict[str, str]:
    return {MOONCAKE_CONFIG_ENV: MOONCAKE_CONFIG_PATH} if o.hicache == "l1l2l3" else {}


def feature_flags(o: Options) -> list[str]:
    """Graph, DP attention, multimodal transport and parsers, in that order."""
    out: list[str] = []
    if o.breakable_cuda_graph == "on":
        out += ["--cuda-graph-backend-prefill", "breakable"]
    if o.dp_attention == "on":
        out += ["--enable-dp-attention", "--dp-size", str(o.tp)]
    if o.mm_transport != "auto":
        out += ["--mm-feature-transport", o.mm_transport]
    if o.reasoning_parser == "on":
        out += ["--reasoning-parser", "auto"]
    if o.tool_call_parser == "on":
        out += ["--tool-call-parser", "auto"]
    return out


def network_flags(port: int) -> list[str]:
    return ["--host", "0.0.0.0", "--port", str(port)]


def argv_units(argv: tuple[str, ...] | list[str]) -> list[tuple[str, ...]]:
    """Group an argv into (flag, value...) units; words before the first flag form one unit."""
    units: list[list[str]] = []
    for word in argv:
        if word.startswith("--") or not units:
            units.append([word])
        else:
            units[-1].append(word)
    return [tuple(u) for u in units]
