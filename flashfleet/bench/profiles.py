"""Workload profiles: data (profiles.toml) -> typed ``Profile``s.

A profile is checked when it is loaded (unknown flags, backends, datasets, gate names), so a
typo fails before a cluster is billed, not half-way through a sweep.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from flashfleet.stack.thresholds import Thresholds

# The two module names of the same benchmark; the first is the one sglang 0.5.23 recommends.
BENCH_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")

# sglang 0.5.23 `sglang/benchmark/serving.py`: every option string of its argparse parser.
BENCH_SERVING_FLAGS = frozenset(
    {
        "--agentic-max-turns", "--apply-chat-template", "--backend", "--base-url", "--cache-report",
        "--dataset-name", "--dataset-offset", "--dataset-path", "--disable-ignore-eos",
        "--disable-stream", "--disable-tqdm", "--extra-request-body", "--fake-prefill",
        "--flush-cache", "--flush-cache-timeout", "--goodput", "--gsp-fast-prepare",
        "--gsp-group-distribution", "--gsp-num-groups", "--gsp-num-turns", "--gsp-ordered",
        "--gsp-output-len", "--gsp-prompts-per-group", "--gsp-question-len", "--gsp-range-ratio",
        "--gsp-send-routing-key", "--gsp-system-prompt-len", "--gsp-zipf-alpha", "--header",
        "--host", "--image-content", "--image-count", "--image-format", "--image-resolution",
        "--logprob-start-len", "--lora-name", "--lora-request-distribution", "--lora-zipf-alpha",
        "--max-concurrency", "--model", "--mooncake-num-rounds", "--mooncake-slowdown-factor",
        "--mooncake-workload", "--num-prompts", "--output-details", "--output-file",
        "--pd-separated", "--plot-throughput", "--port", "--print-requests", "--profile",
        "--profile-activities", "--profile-by-stage", "--profile-decode-url",
        "--profile-num-steps", "--profile-output-dir", "--profile-prefill-url", "--profile-prefix",
        "--profile-stages", "--profile-start-step", "--profile-steps", "--prompt-suffix",
        "--random-image-count", "--random-input-len", "--random-output-len",
        "--random-range-ratio", "--ready-check-timeout-sec", "--request-rate", "--return-logprob",
        "--return-routed-experts", "--rust-client", "--rust-worker-threads", "--seed",
        "--served-model-name", "--sharegpt-context-len", "--sharegpt-output-len",
        "--speed-bench-category", "--speed-bench-output-len", "--tag", "--temperature",
        "--token-ids-logprob", "--tokenize-prompt", "--tokenizer", "--top-logprobs-num",
        "--top-p", "--use-trace-timestamps", "--warmup-requests",
    }
)  # fmt: skip

BACKENDS = frozenset(
    {
        "sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "sglang-embedding", "vllm",
        "vllm-chat", "vllm-embedding", "lmdeploy", "lmdeploy-chat", "trt", "gserver", "truss",
    }
)  # fmt: skip

DATASETS = frozenset(
    {
        "agentic-trace", "sharegpt", "custom", "openai", "random", "random-ids",
        "generated-shared-prefix", "mmmu", "image", "mooncake", "longbench_v2", "speed-bench",
    }
)  # fmt: skip

# Set by the driver for every run: a profile that sets them would fight the driver.
DRIVER_FLAGS = frozenset(
    {"--backend", "--base-url", "--host", "--port", "--dataset-name", "--num-prompts",
     "--max-concurrency", "--output-file", "--tag", "--disable-tqdm"}
)  # fmt: skip

ArgValue = str | int | float | bool | list[str | int | float]
KINDS = ("single-turn", "agentic")
# How a profile keeps the server's prefix cache out of (or deliberately in) its numbers.
CACHE_COLD = "cold"  # every level and run draws prompts nothing sent before (a fresh seed)
CACHE_SHARED = "shared-prefix"  # the prompts share prefixes on purpose: flushed before measuring
CACHE_MODES = (CACHE_COLD, CACHE_SHARED)


class ProfileError(ValueError):
    """A profile that cannot be run as written (names the profile and the field)."""


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    backend: str
    dataset: str
    concurrency: tuple[int, ...]
    prompts_per_concurrency: int = 4
    min_prompts: int = 16
    timeout_s: float = 3600.0
    args: Mapping[str, ArgValue] = field(default_factory=dict)
    gate: Thresholds = field(default_factory=Thresholds)
    # Warm-up requests per unit of concurrency (0: the profile's own --warmup-requests, if any).
    warmup_per_concurrency: int = 0
    # hardware id -> highest concurrency level that hardware runs (the public record's own caps).
    max_concurrency: Mapping[str, int] = field(default_factory=dict)
    kind: str = "single-turn"  # agentic adds 1 / p90(e2e latency / output length)
    source: str = ""  # where the method comes from, when it reproduces a published one
    cache: str = CACHE_COLD  # CACHE_MODES

    def warmup_requests(self, concurrency: int) -> int | None:
        if self.warmup_per_concurrency:
            return self.warmup_per_concurrency * concurrency
        value = self.args.get("warmup-requests")
        return int(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None

    def for_hardware(self, hardware: str | None) -> Profile:
        """The levels this hardware runs (InferenceX stops H200 at 64)."""
        cap = self.max_concurrency.get(hardware or "")
        if cap is None:
            return self
        kept = tuple(c for c in self.concurrency if c <= cap)
        return replace(self, concurrency=kept or self.concurrency[:1])

    def num_prompts(self, concurrency: int) -> int:
        return max(self.min_prompts, concurrency * self.prompts_per_concurrency)

    def expected_requests(self, concurrency: int) -> int:
        """Requests bench_serving will send (generated-shared-prefix ignores --num-prompts)."""
        if self.dataset == "generated-shared-prefix":
            groups = int(self.args.get("gsp-num-groups", 64))  # type: ignore[arg-type]
            per_group = int(self.args.get("gsp-prompts-per-group", 16))  # type: ignore[arg-type]
            turns = int(self.args.get("gsp-num-turns", 1))  # type: ignore[arg-type]
            return groups * per_group * turns
        return self.num_prompts(concurrency)

    def with_overrides(
        self,
        *,
        concurrency: tuple[int, ...] | None = None,
        num_prompts: int | None = None,
        gate: Thresholds | None = None,
    ) -> Profile:
        """The same profile with a shorter sweep, a fixed request count or another gate."""
        out = self
        if concurrency:
            out = replace(out, concurrency=_check_concurrency(self.name, list(concurrency)))
        if num_prompts is not None:
            if num_prompts < 1:
                raise ProfileError(f"profile {self.name}: num_prompts must be at least 1")
            out = replace(out, min_prompts=num_prompts, prompts_per_concurrency=0)
        if gate is not None:
            out = replace(out, gate=gate)
        return out


def _check_concurrency(name: str, values: Any) -> tuple[int, ...]:
    if not isinstance(values, list) or not values:
        raise ProfileError(f"profile {name}: concurrency must be a non-empty list of integers")
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ProfileError(f"profile {name}: concurrency values must be integers >= 1: {values}")
    return tuple(values)


def _check_args(name: str, args: Any) -> dict[str, ArgValue]:
    if not isinstance(args, dict):
        raise ProfileError(f"profile {name}: [args] must be a table")
    for key, value in args.items():
        flag = f"--{key}"
        if flag not in BENCH_SERVING_FLAGS:
            raise ProfileError(f"profile {name}: bench_serving has no flag {flag}")
        if flag in DRIVER_FLAGS:
            raise ProfileError(f"profile {name}: {flag} is set by the driver, not by a profile")
        if value is False:
            raise ProfileError(f"profile {name}: {flag} = false; leave a switch out to turn it off")
        if not isinstance(value, str | int | float | list):
            raise ProfileError(f"profile {name}: {flag} has an unsupported value {value!r}")
    return dict(args)


def _check_caps(name: str, caps: Any) -> dict[str, int]:
    if not isinstance(caps, dict) or any(
        isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in caps.values()
    ):
        raise ProfileError(f"profile {name}: max_concurrency must map hardware ids to integers >= 1")
    return dict(caps)


def profile_from_mapping(name: str, data: Mapping[str, Any]) -> Profile:
    known = {"description", "backend", "dataset", "concurrency", "prompts_per_concurrency",
             "min_prompts", "timeout_s", "args", "gate", "warmup_per_concurrency",
             "max_concurrency", "kind", "source", "cache"}  # fmt: skip
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"profile {name}: unknown field(s) {', '.join(unknown)}")
    backend = data.get("backend", "sglang")
    if backend not in BACKENDS:
        raise ProfileError(f"profile {name}: unknown backend {backend!r}")
    dataset = data.get("dataset", "random-ids")
    if dataset not in DATASETS:
        raise ProfileError(f"profile {name}: unknown dataset {dataset!r}")
    kind = data.get("kind", "single-turn")
    if kind not in KINDS:
        raise ProfileError(f"profile {name}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    cache = data.get("cache", CACHE_COLD)
    if cache not in CACHE_MODES:
        raise ProfileError(f"profile {name}: cache must be one of {', '.join(CACHE_MODES)}, not {cache!r}")
    args = data.get("args", {})
    if isinstance(args, dict) and ("seed" in args or "flush-cache" in args):
        raise ProfileError(f"profile {name}: --seed and --flush-cache are set by the driver (see `cache`)")
    if dataset == "generated-shared-prefix" and cache != CACHE_SHARED:
        raise ProfileError(
            f"profile {name}: generated-shared-prefix shares prefixes on purpose: cache = {CACHE_SHARED!r}"
        )
    warmup = data.get("warmup_per_concurrency", 0)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ProfileError(f"profile {name}: warmup_per_concurrency must be an integer >= 0")
    if warmup and "warmup-requests" in data.get("args", {}):
        raise ProfileError(f"profile {name}: set warmup_per_concurrency or args.warmup-requests, not both")
    try:
        gate = Thresholds.from_mapping(data.get("gate", {}))
    except ValueError as err:
        raise ProfileError(f"profile {name}: gate: {err}") from None
    return Profile(
        name=name,
        description=str(data.get("description", "")),
        backend=backend,
        dataset=dataset,
        concurrency=_check_concurrency(name, data.get("concurrency", [1])),
        prompts_per_concurrency=int(data.get("prompts_per_concurrency", 4)),
        min_prompts=int(data.get("min_prompts", 16)),
        timeout_s=float(data.get("timeout_s", 3600)),
        args=_check_args(name, data.get("args", {})),
        gate=gate,
        warmup_per_concurrency=warmup,
        max_concurrency=_check_caps(name, data.get("max_concurrency", {})),
        kind=kind,
        source=str(data.get("source", "")),
        cache=cache,
    )


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """Profiles of a TOML file (default: the packaged profiles.toml), by name."""
    if path is None:
        text = resources.files("flashfleet.bench").joinpath("profiles.toml").read_text()
    else:
        text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileError(f"profiles file: {err}") from None
    return {name: profile_from_mapping(name, body) for name, body in data.get("profiles", {}).items()}


def get_profile(name: str, path: Path | None = None) -> Profile:
    profiles = load_profiles(path)
    if name not in profiles:
        from flashfleet.suggest import did_you_mean

        hint = did_you_mean(name, profiles)
        raise ProfileError(f"unknown profile {name!r} (choose from: {', '.join(profiles)}){hint}")
    return profiles[name]
