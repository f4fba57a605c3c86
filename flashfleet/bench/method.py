"""How a run measured: the workload and the load generator, so that two runs are only lined up
when they measured the same way (and a figure is only put next to the public record when it
was measured by the record's method).

The load generator is pinned by its module, the sglang version that provides it (read from the
interpreter that runs it, before the first level) and, on the nodes, the image's digest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flashfleet.bench.profiles import CACHE_SHARED, Profile
from flashfleet.bench.runner import Completed, Invocation, Runner
from flashfleet.bench.seeds import level_seeds

VERSION_MARK = "flashfleet-client-version"
# Printed by the interpreter that runs bench_serving; one argv, no shell.
VERSION_PROBE = f"import importlib.metadata as m; print('{VERSION_MARK}', m.version('sglang'))"
# What must be equal for two runs to be compared (concurrency levels may differ: the plot
# lines them up level by level).
COMPARED = (
    "profile", "backend", "dataset", "input_len", "output_len", "random_range_ratio",
    "ignore_eos", "request_rate", "prompts_per_concurrency", "warmup_per_concurrency",
    "client_module", "client_version",
)  # fmt: skip
NO_IGNORE_EOS_BACKENDS = frozenset({"trt"})  # bench_serving sends no ignore_eos to these
# How the prefix cache was kept out of the numbers (or measured on purpose): runs whose cache
# methods differ are never lined up, whatever else they share.
CACHE_METHOD = {
    "cold": "cold: fresh seed per level, warm-up from its own seed",
    CACHE_SHARED: "shared prefix on purpose: warm-up, then --flush-cache before the measured requests",
}
UNKNOWN_CACHE_METHOD = "unknown (not recorded: one seed for every level and run)"


def probe_client_version(runner: Runner, python: str) -> tuple[str | None, str | None]:
    """(sglang version of the load generator, why it is unknown)."""
    try:
        done: Completed = runner(
            Invocation(argv=(python, "-c", VERSION_PROBE), output_name="none", timeout_s=300)
        )
    except Exception as err:  # the levels will fail on their own if the runner is broken
        return None, f"client version not read: {type(err).__name__}: {err}"
    found = re.search(rf"{VERSION_MARK} (\S+)", done.log)
    if found:
        return found.group(1), None
    last = done.runner_error or (done.log.strip().splitlines() or ["no output"])[-1]
    return None, f"client version not read (exit {done.returncode}): {last}"


def method_of(
    profile: Profile, *, module: str, client_version: str | None, run_id: str | None = None
) -> dict[str, Any]:
    ignore_eos = "disable-ignore-eos" not in profile.args and profile.backend not in NO_IGNORE_EOS_BACKENDS
    return {
        "profile": profile.name,
        "source": profile.source or None,
        "kind": profile.kind,
        "backend": profile.backend,
        "dataset": profile.dataset,
        "input_len": profile.args.get("random-input-len") or profile.args.get("gsp-question-len"),
        "output_len": profile.args.get("random-output-len") or profile.args.get("gsp-output-len"),
        "random_range_ratio": profile.args.get("random-range-ratio"),
        "ignore_eos": ignore_eos,
        "request_rate": str(profile.args.get("request-rate", "inf")),  # bench_serving's default
        "prompts_per_concurrency": profile.prompts_per_concurrency,
        "warmup_per_concurrency": profile.warmup_per_concurrency or None,
        "concurrency": list(profile.concurrency),
        "client_module": module,
        "client_version": client_version,
        "cache_method": CACHE_METHOD[profile.cache],
        "run_id": run_id,
        "seeds": [
            {"concurrency": s.concurrency, "measured": s.measured, "warmup": s.warmup}
            for s in level_seeds(run_id, profile.concurrency)
        ]
        if run_id
        else None,
    }


def cache_method_of(method: Mapping[str, Any] | None) -> str:
    return str((method or {}).get("cache_method") or UNKNOWN_CACHE_METHOD)


def cache_mismatch(methods: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """One line naming the cache methods when the runs differ in it, else None."""
    found = {label: cache_method_of(m) for label, m in methods.items()}
    if len(set(found.values())) < 2:
        return None
    return "cache method differs: " + "; ".join(f"{label} = {v}" for label, v in found.items())


def differences(methods: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line per compared field whose value is not the same in every run (label -> method)."""
    lines = []
    missing = [label for label, m in methods.items() if not m]
    if missing:
        lines.append(f"method not recorded for {', '.join(missing)}")
    known = {label: m for label, m in methods.items() if m}
    for key in COMPARED:
        values = {label: m.get(key) for label, m in known.items()}
        if len({repr(v) for v in values.values()}) > 1:
            lines.append(f"{key}: " + "; ".join(f"{label} = {v}" for label, v in values.items()))
    return lines
