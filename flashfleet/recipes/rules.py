"""Combinations known not to work, each with its reason and where it comes from.

A rule never fixes anything: it refuses, naming the option it blames. ``check`` returns the
first rule broken (the order below goes from the most basic to the most specific).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from flashfleet.catalog import CHECKPOINTS, Hardware
from flashfleet.recipes.errors import RecipeError
from flashfleet.recipes.options import Options


@dataclass(frozen=True)
class Context:
    hardware: Hardware
    strategy: str
    topology: str
    options: Options


@dataclass(frozen=True)
class Rule:
    id: str
    option: str
    source: str
    broken: Callable[[Context], str | None]  # the reason when broken, else None


def _kv_dsa_tilelang_fp8(c: Context) -> str | None:
    if c.options.kv_dsa == "fp8-tilelang" and not c.hardware.has("tilelang_fp8_kv"):
        return "TileLang DSA with an FP8 KV cache is not a valid CUDA combination"
    return None


def _kv_dsa_trtllm(c: Context) -> str | None:
    if c.options.kv_dsa != "fp8-trtllm" or c.hardware.has("trtllm_dsa"):
        return None
    if c.hardware.vendor == "amd":
        return f"TRT-LLM DSA is not an {c.hardware.label} (ROCm) backend"  # AMD: "an"
    return f"FP8 KV + TRT-LLM DSA is disabled on {c.hardware.label} (Hopper)"


def _precision(c: Context) -> str | None:
    p = c.options.precision
    if p in ("mxfp4", "nvfp4") and not c.hardware.has(p):
        where = "MI355X" if p == "mxfp4" else "Blackwell (GB300)"
        return f"{p.upper()} checkpoints are served on {where} only, not on {c.hardware.label}"
    return None


def _checkpoint(c: Context) -> str | None:
    repos = CHECKPOINTS[c.options.precision]
    if c.options.checkpoint is not None and c.options.checkpoint not in repos:
        choices, precision = ", ".join(repos), c.options.precision
        return f"{c.options.checkpoint} is not a checkpoint of precision {precision} (use one of: {choices})"
    return None


def _topology_on_hardware(c: Context) -> str | None:
    if c.topology not in c.hardware.topologies:
        return f"{c.topology} is not available on {c.hardware.label}: {c.hardware.topology_note}"
    return None


def _multi_node_topology(c: Context) -> str | None:
    from flashfleet.recipes.layouts import TOPOLOGIES

    if c.options.nodes <= 1 or not TOPOLOGIES[c.topology].single_node:
        return None
    if c.topology == "pd" and c.options.prefill:
        return None  # PD across nodes: an instance may span nodes (multi-node TP)
    if c.topology == "pd":
        return (
            "pd on one node is the seed's validated pair; across nodes, give the instances "
            "(prefill=1 decode=1 or more, each on nodes of its own)"
        )
    return f"{c.topology} is rendered as the single-node layout it was validated on; nodes must be 1"


def _cluster_shape(c: Context) -> str | None:
    o = c.options
    if (o.prefill or o.decode) and c.topology != "pd":
        return "prefill and decode instances are the pd topology's; other topologies scale by replicas"
    if bool(o.prefill) != bool(o.decode):
        return (
            f"prefill={o.prefill} decode={o.decode}: PD across nodes needs at least one of each "
            "(both 0: the seed's single-node pair)"
        )
    return None


def _pd_replicas(c: Context) -> str | None:
    if c.options.replicas > 1 and c.topology == "pd":
        return "pd scales by its prefill and decode instances (prefill=N decode=M), not by replicas"
    return None


def _router_policy(c: Context) -> str | None:
    o = c.options
    if o.router_policy == "cache_aware" or o.prefill or o.replicas > 1:
        return None
    if c.topology == "pd":
        return (
            "the single-node PD router fronts one prefill and one decode, so it has no worker to "
            "pick; set prefill and decode instances for the routed layout"
        )
    return "one instance has no router to pick workers; set replicas"


def _kv_transfer(c: Context) -> str | None:
    if c.options.kv_transfer != "nixl" and c.topology != "pd":
        return "kv_transfer applies to the pd topology only"
    return None


def _tp_fits(c: Context) -> str | None:
    o, hw = c.options, c.hardware
    if c.topology == "pd" and not o.prefill:
        need = o.tp + (o.pd_decode_tp or o.tp)
        if need > hw.gpus_per_node:
            return (
                f"PD needs {need} GPUs (prefill tp {o.tp} + decode tp) on one node; "
                f"{hw.label} has {hw.gpus_per_node}"
            )
        return None
    total = hw.gpus_per_node * o.nodes
    if o.tp % o.nodes:
        return f"tp {o.tp} must split evenly over {o.nodes} nodes"
    if o.tp > total:
        return f"tp {o.tp} exceeds the {total} GPUs of {o.nodes} {hw.label} node(s)"
    per_node = o.tp // o.nodes
    if hw.gpus_per_node % per_node:
        fits = [n for n in range(1, hw.gpus_per_node + 1) if hw.gpus_per_node % n == 0]
        return (
            f"tp {o.tp} puts {per_node} ranks on a {hw.gpus_per_node}-GPU {hw.label} node; "
            f"ranks per node must divide its GPUs ({', '.join(map(str, fits))})"
        )
    return None


def _breakable(c: Context) -> str | None:
    if c.options.breakable_cuda_graph != "on":
        return None
    if not c.hardware.has("breakable_cuda_graph"):
        return f"Breakable CUDA graph is disabled on {c.hardware.label}"
    if c.topology == "encoder-disagg":
        return (
            "the encoder-disaggregation language server disables the prefill CUDA graph, "
            "so a breakable prefill graph cannot apply"
        )
    return None


def _dflash2_fa4(c: Context) -> str | None:
    if c.options.speculative == "dflash2" and not c.hardware.has("fa4_draft"):
        return f"DFlash2's FA4 draft path is disabled on {c.hardware.label}"
    return None


def _spec_dp_attention(c: Context) -> str | None:
    if c.options.speculative != "off" and c.options.dp_attention == "on":
        return f"speculative decoding ({c.options.speculative}) does not run with DP attention"
    return None


def _spec_pd(c: Context) -> str | None:
    if c.topology == "pd" and c.options.speculative != "off":
        return (
            "speculative decoding does not start under PD (draft-graph capture width assert on "
            "the prefill role, decode-side memory pressure at TP2); run PD without speculative flags"
        )
    return None


def _pd_same_tp(c: Context) -> str | None:
    o = c.options
    if o.pd_decode_tp is None:
        return None
    if c.topology != "pd":
        return "pd_decode_tp applies to the pd topology only"
    if o.pd_decode_tp != o.tp:
        return (
            f"PD roles keep the same TP size (prefill tp {o.tp}, decode tp {o.pd_decode_tp}): "
            "numeric correctness across slice paths is unverified"
        )
    return None


def _cuda_vmm(c: Context) -> str | None:
    if c.options.mm_transport == "cuda_vmm" and not (c.hardware.has("mnnvl") and c.options.nodes > 1):
        return "CUDA VMM transport applies only to multi-node GB200/GB300 systems on the MNNVL fabric"
    return None


def _hicache_size(c: Context) -> str | None:
    if c.options.hicache_size is not None and c.options.hicache == "off":
        return "hicache_size sets the host tier, which needs hicache=l1l2 or l1l2l3"
    return None


def _prefetch_threads(c: Context) -> str | None:
    if c.options.weight_prefetch_threads is not None and c.options.weight_prefetch == "off":
        return "weight_prefetch_threads sizes the checkpoint prefetch, which needs weight_prefetch=on"
    return None


def _peer_load(c: Context) -> str | None:
    o = c.options
    if o.peer_load == "off":
        return None
    if o.replicas < 2:
        return "peer_load needs replicas of 2 or more: each one after the first loads from another replica"
    if c.topology != "unified":
        return "peer_load applies to replicas of the unified topology (one server each)"
    if o.nodes > 1:
        return "peer_load needs replicas of one node each: the loader reaches its seed at one node's address"
    if o.dp_attention == "on" and o.peer_load == "nccl":
        # sglang/srt/managers/tokenizer_control_mixin.py asserts one DP rank for the send group;
        # the TransferEngine's sessions are published per TP rank, past that assertion
        return (
            "an NCCL seed serves the loader only with dp_size 1, and dp_attention sets --dp-size to tp "
            "(peer_load=on, over the TransferEngine, has no such limit)"
        )
    if o.speculative != "off":
        return (
            "the draft model would load from the seed too (--speculative-draft-load-format follows "
            "--load-format), and a seed publishes its target model's weights only: set speculative=off"
        )
    return None


def _weight_cache(c: Context) -> str | None:
    """SGLang 0.5.23's weight-cache daemon: its own refusals, said before a node boots."""
    o = c.options
    if o.weight_cache == "off":
        return None
    if o.speculative != "off":
        # sglang/srt/arg_groups/model_path_hook.py refuses it: the daemon does not export the draft
        return (
            "weight_cache does not run with speculative decoding: SGLang 0.5.23's weight-cache daemon "
            "does not export the draft model's weights (MTP included); set speculative=off"
        )
    if o.precision != "fp8":
        # sglang/srt/weight_cache/protocol.py IPC_QUANT_ALLOWLIST: unquantized and block-wise FP8
        return (
            f"weight_cache shares only unquantized or block-wise FP8 weights in SGLang 0.5.23, "
            f"not {o.precision}: set precision=fp8"
        )
    if o.peer_load != "off":
        return "weight_cache and peer_load both choose where the weights come from: set one of them"
    if c.hardware.vendor != "nvidia":
        return (
            "weight_cache shares the weights over CUDA IPC; flashfleet enables it on NVIDIA GPUs only, "
            f"not {c.hardware.label}"
        )
    return None


def _mamba_pin_and_ratio(c: Context) -> str | None:
    if c.options.mamba_full_memory_ratio is not None and c.options.max_mamba_cache_size is not None:
        return "set mamba_full_memory_ratio or max_mamba_cache_size, not both (the pin overrides the ratio)"
    return None


def _extra_words(c: Context) -> list[tuple[str, str | None]]:
    """(flag, value) pairs of extra_args; a value is the next word when it is not a flag."""
    words = list(c.options.extra_args)
    pairs: list[tuple[str, str | None]] = []
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        flag, eq, inline = word.partition("=")
        if eq:
            pairs.append((flag, inline))
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            pairs.append((flag, words[i + 1]))
        else:
            pairs.append((flag, None))
    return pairs


def _extra_args_shape(c: Context) -> str | None:
    words = c.options.extra_args
    if words and not words[0].startswith("--"):
        return f"extra_args must start with a --flag, got {words[0]!r}"
    return None


@cache
def sglang_flags() -> frozenset[str]:
    """The pinned `sglang serve` option strings (catalog/sglang_flags.txt, written from the real
    parser by scripts/sglang_flags.py and checked against it in tests/contracts)."""
    text = resources.files("flashfleet.catalog").joinpath("sglang_flags.txt").read_text(encoding="utf-8")
    return frozenset(ln for ln in text.splitlines() if ln.startswith("--"))


def _extra_flags_known(c: Context) -> str | None:
    unknown = [flag for flag, _ in _extra_words(c) if flag not in sglang_flags()]
    if unknown:
        near = difflib.get_close_matches(unknown[0], sglang_flags(), n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        return f"{unknown[0]} is not a flag of the pinned sglang serve{hint}"
    return None


def _prefix_cache(c: Context) -> str | None:
    if any(flag == "--disable-radix-cache" for flag, _ in _extra_words(c)):
        return "the prefix (radix) cache stays enabled for every strategy; --disable-radix-cache is refused"
    return None


def _linear_lower_bound(c: Context) -> str | None:
    for flag, value in _extra_words(c):
        if flag != "--json-model-override-args" or value is None:
            continue
        try:
            override = json.loads(value)
        except json.JSONDecodeError:
            return f"--json-model-override-args is not valid JSON: {value!r}"
        if _mentions(override, "linear_lower_bound"):
            return (
                "the checkpoint's KDA linear_lower_bound must stay unchanged; "
                "do not override it through --json-model-override-args"
            )
    return None


def _mentions(node: object, key: str) -> bool:
    if isinstance(node, dict):
        return any(k == key or _mentions(v, key) for k, v in node.items())
    if isinstance(node, list):
        return any(_mentions(v, key) for v in node)
    return False


# Flags whose value is a secret, or that read one from a file: in an argv they are visible in
# every process list, unit file and `docker inspect` of the node (docs/security.md, "API key").
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--config")
# A secret flashfleet has no way to hand over otherwise: refused outright.
UNSUPPORTED_SECRET_FLAGS = ("--ssl-keyfile-password",)


def _secret_in_extra(c: Context) -> str | None:
    for flag, _ in _extra_words(c):
        if flag in SECRET_FLAGS:
            return (
                f"{flag} would put a secret (or its file) on the command line; "
                "set serving.apiKey: required and the flashfleet:apiKey secret instead"
            )
        if flag in UNSUPPORTED_SECRET_FLAGS:
            return (
                f"{flag} would put a secret on the command line, readable by every user of the node; "
                "terminate TLS in front of the servers instead (docs/security.md)"
            )
    return None


def _typed_flag_in_extra(c: Context) -> str | None:
    from flashfleet.recipes.flags import FLAG_OWNERS

    for flag, _ in _extra_words(c):
        owner = FLAG_OWNERS.get(flag)
        if owner:
            return f"{flag} is set by the {owner} option; change that option instead of passing the flag"
    return None


RULES: tuple[Rule, ...] = (
    Rule("topology-hardware", "topology", "hardware catalog (topologies)", _topology_on_hardware),
    Rule("precision-hardware", "precision", "seed: model introduction (precision row)", _precision),
    Rule("checkpoint-precision", "checkpoint", "seed: model introduction (checkpoints)", _checkpoint),
    Rule("pd-replicas", "replicas", "sglang router: PD mode takes prefill and decode workers", _pd_replicas),
    Rule(
        "cluster-shape",
        "prefill",
        "sglang router: regular workers, or prefill and decode workers",
        _cluster_shape,
    ),
    Rule("multi-node-topology", "nodes", "seed 3.4-3.6: single-node layouts", _multi_node_topology),
    Rule(
        "router-policy",
        "router_policy",
        "seed 3.6 PD router command (one prefill, one decode)",
        _router_policy,
    ),
    Rule(
        "kv-transfer-pd",
        "kv_transfer",
        "sglang server args (--disaggregation-transfer-backend)",
        _kv_transfer,
    ),
    Rule("tp-fits", "tp", "hardware catalog (GPUs per node)", _tp_fits),
    Rule(
        "tilelang-fp8-kv-cuda",
        "kv_dsa",
        "seed: Keep the KV and DSA backends paired",
        _kv_dsa_tilelang_fp8,
    ),
    Rule("trtllm-dsa-hardware", "kv_dsa", "seed: Keep the KV and DSA backends paired", _kv_dsa_trtllm),
    Rule(
        "breakable-cuda-graph",
        "breakable_cuda_graph",
        "seed: Deployment (Breakable Cuda Graph)",
        _breakable,
    ),
    Rule("dflash2-fa4", "speculative", "seed: Change the speculative algorithm", _dflash2_fa4),
    Rule("speculative-pd", "speculative", "seed 3.6 Known limitations", _spec_pd),
    Rule(
        "speculative-dp-attention",
        "dp_attention",
        "seed: Change the speculative algorithm",
        _spec_dp_attention,
    ),
    Rule("pd-same-tp", "pd_decode_tp", "seed 3.6 Known limitations", _pd_same_tp),
    Rule("cuda-vmm-mnnvl", "mm_transport", "seed: Multimodal memory", _cuda_vmm),
    Rule("hicache-size-needs-tier", "hicache_size", "seed: Extend the cache hierarchy", _hicache_size),
    Rule(
        "prefetch-threads-need-prefetch",
        "weight_prefetch_threads",
        "sglang server args (--weight-loader-prefetch-num-threads)",
        _prefetch_threads,
    ),
    Rule(
        "peer-load-replicas",
        "peer_load",
        "sglang remote-instance weight loader (a seed of the same parallelism, its target model "
        "only; NCCL: dp_size 1)",
        _peer_load,
    ),
    Rule(
        "weight-cache-limits",
        "weight_cache",
        "sglang 0.5.23 weight cache (sglang/srt/arg_groups/model_path_hook.py: not with speculative "
        "decoding; sglang/srt/weight_cache/protocol.py: unquantized or block-wise FP8 only)",
        _weight_cache,
    ),
    Rule(
        "mamba-pin-or-ratio",
        "max_mamba_cache_size",
        "sglang server args (--max-mamba-cache-size overrides the ratio)",
        _mamba_pin_and_ratio,
    ),
    Rule(
        "extra-args-shape",
        "extra_args",
        "flashfleet: extra_args is an argv list",
        _extra_args_shape,
    ),
    Rule(
        "extra-args-known-flag",
        "extra_args",
        "sglang 0.5.23 serve arguments (flashfleet/catalog/sglang_flags.txt)",
        _extra_flags_known,
    ),
    Rule(
        "prefix-cache-on",
        "extra_args",
        "seed: Size both memory pools (keep the prefix cache enabled)",
        _prefix_cache,
    ),
    Rule(
        "linear-lower-bound",
        "extra_args",
        "seed: Size both memory pools (keep the KDA lower bound)",
        _linear_lower_bound,
    ),
    Rule(
        "extra-args-no-secret",
        "extra_args",
        "flashfleet: secrets never in an argv (docs/security.md)",
        _secret_in_extra,
    ),
    Rule(
        "extra-args-typed",
        "extra_args",
        "flashfleet: one way to set each flag",
        _typed_flag_in_extra,
    ),
)


def check(ctx: Context) -> None:
    """Raise ``RecipeError`` for the first broken rule."""
    for rule in RULES:
        reason = rule.broken(ctx)
        if reason:
            raise RecipeError(rule.option, rule.id, f"{rule.option}: {reason}", rule.source)
