"""The deployment panel's options: names, allowed values, and parsing from text.

Defaults are not fixed here: they are layered (hardware, then strategy, then topology), see
``flashfleet.recipes.render.resolve``. ``OPTION_DEFS`` is also what the README table and
``flashfleet matrix`` show.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from flashfleet.recipes.errors import RecipeError

ON_OFF = ("off", "on")
_NULL_WORDS = {"auto", "none", "default", "null", ""}


@dataclass(frozen=True)
class OptionDef:
    name: str
    help: str
    default: str  # how the default is chosen, for people
    choices: tuple[str, ...] = ()
    kind: str = "choice"  # choice | int | float | str | argv
    minimum: float | None = None
    nullable: bool = False

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


OPTION_DEFS: dict[str, OptionDef] = {
    d.name: d
    for d in (
        OptionDef("precision", "Checkpoint precision", "fp8", ("fp8", "mxfp4", "nvfp4")),
        OptionDef(
            "checkpoint",
            "Checkpoint repository (must belong to the precision)",
            "first repository of the precision",
            kind="str",
            nullable=True,
        ),
        OptionDef(
            "kv_dsa",
            "KV cache dtype and both DSA backends, switched together",
            "hardware: Blackwell fp8-trtllm, Hopper bf16-tilelang, MI355X fp8-tilelang",
            ("fp8-trtllm", "bf16-tilelang", "fp8-tilelang"),
        ),
        OptionDef(
            "mm_transport",
            "Multimodal feature transport (--mm-feature-transport)",
            "hardware: auto on NVIDIA, cpu on MI355X",
            ("auto", "cpu", "cuda_ipc", "cuda_vmm"),
        ),
        OptionDef(
            "breakable_cuda_graph",
            "on adds --cuda-graph-backend-prefill breakable",
            "off",
            ON_OFF,
        ),
        OptionDef(
            "hicache",
            "HiCache tiers: l1l2 spills to host memory, l1l2l3 adds the Mooncake store",
            "off",
            ("off", "l1l2", "l1l2l3"),
        ),
        OptionDef(
            "hicache_size",
            "Host tier size per rank in GB (--hicache-size)",
            "unset (SGLang's ratio)",
            kind="int",
            minimum=1,
            nullable=True,
        ),
        OptionDef(
            "speculative",
            "Speculative algorithm: eagle (MTP), off, or dflash2 (gated draft)",
            "strategy: low-latency eagle, high-throughput off",
            ("eagle", "off", "dflash2"),
        ),
        OptionDef("reasoning_parser", "on = --reasoning-parser auto (glm45)", "on", ON_OFF),
        OptionDef("tool_call_parser", "on = --tool-call-parser auto (glm47)", "on", ON_OFF),
        OptionDef("dp_attention", "DP attention (--enable-dp-attention)", "off", ON_OFF),
        OptionDef(
            "tp",
            "Tensor-parallel size (per role under PD)",
            "hardware: GPUs a node serves with (GB300 4, H200 8, MI355X 4); PD 2",
            kind="int",
            minimum=1,
        ),
        OptionDef(
            "pd_decode_tp",
            "Decode TP under PD; must equal tp",
            "same as tp",
            kind="int",
            minimum=1,
            nullable=True,
        ),
        OptionDef(
            "mamba_full_memory_ratio",
            "KDA state pool : KV pool budget ratio (--mamba-full-memory-ratio)",
            "unset (SGLang 0.9)",
            kind="float",
            minimum=0.001,
            nullable=True,
        ),
        OptionDef(
            "max_mamba_cache_size",
            "Pin on KDA state slots (--max-mamba-cache-size)",
            "unset",
            kind="int",
            minimum=1,
            nullable=True,
        ),
        OptionDef(
            "max_running_requests",
            "--max-running-requests",
            "unset (encoder-disagg 64)",
            kind="int",
            minimum=1,
            nullable=True,
        ),
        OptionDef("nodes", "Nodes serving one model instance", "1", kind="int", minimum=1),
        OptionDef(
            "extra_args",
            "Playground escape hatch: extra sglang serve words, checked against the rules",
            "none",
            kind="argv",
        ),
    )
}


@dataclass(frozen=True)
class Options:
    """Effective option values of one render (after all layers)."""

    precision: str
    checkpoint: str | None
    kv_dsa: str
    mm_transport: str
    breakable_cuda_graph: str
    hicache: str
    hicache_size: int | None
    speculative: str
    reasoning_parser: str
    tool_call_parser: str
    dp_attention: str
    tp: int
    pd_decode_tp: int | None
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    max_running_requests: int | None
    nodes: int
    extra_args: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


assert {f.name for f in fields(Options)} == set(OPTION_DEFS), "Options and OPTION_DEFS drifted"


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
