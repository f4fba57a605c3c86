"""The deployment panel's options, each declared once: a field of ``Options``.

A field's annotation is its type (``| None``: ``auto`` unsets it), ``option(...)`` its help,
allowed values and hardware-layer default. ``OPTION_DEFS`` (what ``flashfleet options``, the
README table and ``flashfleet matrix`` show, and what parsing checks) and the first layer of
``flashfleet.recipes.render.resolve`` are derived from these fields; the strategy and topology
layers are in ``flashfleet.recipes.layouts``.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from flashfleet.catalog import Hardware
from flashfleet.recipes.errors import RecipeError

ON_OFF = ("off", "on")
_NULL_WORDS = {"auto", "none", "default", "null", ""}


class _ByStrategy:
    def __repr__(self) -> str:
        return "BY_STRATEGY"


BY_STRATEGY: Any = _ByStrategy()
"""An option's ``default`` when it has no hardware-layer value: every strategy sets it."""


@dataclass(frozen=True)
class OptionDef:
    name: str
    help: str
    choices: tuple[str, ...] = ()
    kind: str = "choice"  # choice | int | float | str | argv
    minimum: float | None = None
    nullable: bool = False
    default: Any = None  # the hardware layer: a value, a function of the hardware, or BY_STRATEGY
    unset: str = "unset"  # what a None (or empty) default means, for people

    def hardware_default(self, hw: Hardware) -> Any:
        return self.default(hw) if callable(self.default) else self.default

    def parse(self, raw: object) -> Any:
        """Turn a CLI or YAML value into the option's value, or raise naming the option."""
        if self.kind == "argv":
            return _parse_argv(self.name, raw)
        if self.kind == "choice" and isinstance(raw, str) and raw.strip().lower() in self.choices:
            return raw.strip().lower()  # a choice named like a null word (mm_transport=auto)
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS):
            if self.nullable:
                return None
            raise RecipeError(self.name, "type", f"{self.name} needs a value")
        if self.kind == "choice":
            return self._parse_choice(raw)
        if self.kind == "str":
            return str(raw)
        return self._parse_number(raw)

    def _parse_choice(self, raw: object) -> str:
        # YAML 1.1 reads an unquoted on/off as a boolean; in text only the listed words count.
        if isinstance(raw, bool) and self.choices == ON_OFF:
            return "on" if raw else "off"
        text = str(raw).strip().lower()
        if text not in self.choices:
            allowed = "|".join(self.choices)
            raise RecipeError(self.name, "choices", f"{self.name}={raw!r}: must be one of {allowed}")
        return text

    def _parse_number(self, raw: object) -> int | float:
        if isinstance(raw, bool):
            raise RecipeError(self.name, "type", f"{self.name}={raw!r}: must be a number")
        try:
            value: int | float = int(str(raw)) if self.kind == "int" else float(str(raw))
        except ValueError:
            kind = "a whole number" if self.kind == "int" else "a number"
            raise RecipeError(self.name, "type", f"{self.name}={raw!r}: must be {kind}") from None
        if not math.isfinite(value):
            raise RecipeError(self.name, "type", f"{self.name}={raw!r}: must be finite")
        if self.minimum is not None and value < self.minimum:
            raise RecipeError(self.name, "range", f"{self.name}={raw!r}: must be >= {self.minimum:g}")
        return value


def _parse_argv(name: str, raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        try:
            return tuple(shlex.split(raw))
        except ValueError as exc:
            raise RecipeError(name, "type", f"{name}: cannot split {raw!r}: {exc}") from None
    if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    raise RecipeError(name, "type", f"{name}: must be a list of command-line words")


def option(
    help: str,
    *,
    choices: tuple[str, ...] = (),
    minimum: float | None = None,
    default: Any = None,
    unset: str = "unset",
) -> Any:
    """Declare one option as a field of ``Options``: help, allowed values, hardware-layer default."""
    spec = {"help": help, "choices": choices, "minimum": minimum, "default": default, "unset": unset}
    return field(metadata={"option": spec})


@dataclass(frozen=True)
class Options:
    """Effective option values of one render (after all layers), and the options' one declaration."""

    precision: str = option("Checkpoint precision", choices=("fp8", "mxfp4", "nvfp4"), default="fp8")
    checkpoint: str | None = option(
        "Checkpoint repository (must belong to the precision)", unset="first repository of the precision"
    )
    kv_dsa: str = option(
        "KV cache dtype and both DSA backends, switched together",
        choices=("fp8-trtllm", "bf16-tilelang", "fp8-tilelang"),
        default=lambda hw: hw.kv_dsa,
    )
    mm_transport: str = option(
        "Multimodal feature transport (--mm-feature-transport)",
        choices=("auto", "cpu", "cuda_ipc", "cuda_vmm"),
        default=lambda hw: hw.mm_transport,
    )
    breakable_cuda_graph: str = option(
        "on adds --cuda-graph-backend-prefill breakable", choices=ON_OFF, default="off"
    )
    hicache: str = option(
        "HiCache tiers: l1l2 spills to host memory, l1l2l3 adds the Mooncake store",
        choices=("off", "l1l2", "l1l2l3"),
        default="off",
    )
    hicache_size: int | None = option(
        "Host tier size per rank in GB (--hicache-size)", minimum=1, unset="unset (SGLang's ratio)"
    )
    speculative: str = option(
        "Speculative algorithm: eagle (MTP), off, or dflash2 (gated draft)",
        choices=("eagle", "off", "dflash2"),
        default=BY_STRATEGY,
    )
    reasoning_parser: str = option("on = --reasoning-parser auto (glm45)", choices=ON_OFF, default="on")
    tool_call_parser: str = option("on = --tool-call-parser auto (glm47)", choices=ON_OFF, default="on")
    dp_attention: str = option("DP attention (--enable-dp-attention)", choices=ON_OFF, default="off")
    tp: int = option("Tensor-parallel size (per role under PD)", minimum=1, default=lambda hw: hw.serve_gpus)
    pd_decode_tp: int | None = option("Decode TP under PD; must equal tp", minimum=1, unset="same as tp")
    mamba_full_memory_ratio: float | None = option(
        "KDA state pool : KV pool budget ratio (--mamba-full-memory-ratio)",
        minimum=0.001,
        unset="unset (SGLang 0.9)",
    )
    max_mamba_cache_size: int | None = option("Pin on KDA state slots (--max-mamba-cache-size)", minimum=1)
    max_running_requests: int | None = option("--max-running-requests", minimum=1)
    # Not in the seed's commands, so a render with it on is Not Verified: it overlaps the disk
    # reads of the checkpoint with the copies to the GPUs (sglang's weight loader).
    weight_prefetch: str = option(
        "Prefetch the checkpoint into the page cache while loading (--weight-loader-prefetch-checkpoints)",
        choices=ON_OFF,
        default="off",
    )
    weight_prefetch_threads: int | None = option(
        "Prefetch threads (--weight-loader-prefetch-num-threads); needs weight_prefetch=on",
        minimum=1,
        unset="sglang's default",
    )
    # Not in the seed's commands either (Not Verified when on): each replica after the first loads
    # the weights GPU to GPU over the network (sglang's remote-instance weight loader) instead of
    # from its disk; its node downloads no shard. on: all of them at once from the first replica
    # over Mooncake's TransferEngine (one-sided reads: the first replica keeps serving); nccl:
    # each from the one before it over an NCCL group (the seed stops serving while it sends),
    # for a fabric the TransferEngine's RDMA transport does not drive (AWS EFA).
    peer_load: str = option(
        "Replicas after the first load their weights from a replica (--load-format remote_instance): "
        "on = from the first, over Mooncake's TransferEngine; nccl = from the one before, over NCCL",
        choices=("off", "on", "nccl"),
        default="off",
    )
    # Not in the seed's commands (Not Verified when on): the model server loads its weights over
    # CUDA IPC from SGLang's standalone weight-cache daemon (sglang.srt.weight_cache.daemon), which
    # keeps them in GPU memory across server restarts, so an option change that keeps the daemon's
    # fingerprint (parallelism, quantization, dtype, model) skips the load. SGLang's other mode,
    # daemon, spawns the daemon inside the engine and ends with it: it saves nothing on a restart.
    # Without a daemon, or on a fingerprint mismatch, the client loads from disk as before.
    weight_cache: str = option(
        "client = --weight-cache-mode client: load the weights from SGLang's standalone weight-cache "
        "daemon over CUDA IPC (kept resident across server restarts), from disk when none answers",
        choices=("off", "client"),
        default="off",
    )
    nodes: int = option("Nodes serving one model instance", minimum=1, default=1)
    # The serving shape: several instances behind one router (SMG, or the release image's
    # sglang_router), each on its own nodes.
    replicas: int = option(
        "Instances of the recipe behind the router, each on its own nodes", minimum=1, default=1
    )
    prefill: int = option("PD across nodes: prefill instances, each on its own nodes", minimum=0, default=0)
    decode: int = option("PD across nodes: decode instances, each on its own nodes", minimum=0, default=0)
    router_policy: str = option(
        "How the router picks a worker (--policy)",
        choices=("cache_aware", "round_robin", "power_of_two"),
        default="cache_aware",
    )
    router: str = option(
        "The router's program: smg (installed by the derived image) or the release image's sglang_router",
        choices=("smg", "sglang_router"),
        default="smg",
    )
    kv_transfer: str = option(
        "PD KV transfer backend (--disaggregation-transfer-backend)",
        choices=("nixl", "mooncake"),
        default="nixl",
    )
    extra_args: tuple[str, ...] = option(
        "Playground escape hatch: extra sglang serve words, checked against the rules",
        default=(),
        unset="none",
    )

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_KINDS: dict[Any, str] = {int: "int", float: "float", str: "str", tuple: "argv"}


def _definition(name: str, annotation: Any, spec: dict[str, Any]) -> OptionDef:
    # The type says the kind and whether auto unsets it: `int | None` -> an int, nullable.
    args = get_args(annotation)
    nullable = get_origin(annotation) in (Union, UnionType) and type(None) in args
    base = next(a for a in args if a is not type(None)) if nullable else annotation
    kind = "choice" if spec["choices"] else _KINDS[get_origin(base) or base]
    return OptionDef(name=name, kind=kind, nullable=nullable, **spec)


_HINTS = get_type_hints(Options)
OPTION_DEFS: dict[str, OptionDef] = {
    f.name: _definition(f.name, _HINTS[f.name], f.metadata["option"]) for f in fields(Options)
}


def hardware_layer(hw: Hardware) -> dict[str, Any]:
    """The first layer of defaults: every option's hardware-layer value, but those a strategy sets."""
    return {d.name: d.hardware_default(hw) for d in OPTION_DEFS.values() if d.default is not BY_STRATEGY}


def parse_overrides(raw: Mapping[str, object]) -> dict[str, Any]:
    """Validate option names and values; unknown names are refused with the list of known ones."""
    parsed: dict[str, Any] = {}
    for name, value in raw.items():
        key = name.strip().replace("-", "_")
        definition = OPTION_DEFS.get(key)
        if definition is None:
            known = ", ".join(OPTION_DEFS)
            raise RecipeError(name, "unknown-option", f"unknown option {name!r} (known: {known})")
        parsed[key] = definition.parse(value)
    return parsed


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """Parse CLI ``NAME=VALUE`` words."""
    raw: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise RecipeError(pair, "syntax", f"--set {pair!r}: expected NAME=VALUE")
        key = name.strip().replace("-", "_")
        if key in raw:
            raise RecipeError(key, "repeated", f"--set {key} given twice: set each option once")
        raw[key] = value
    return parse_overrides(raw)
