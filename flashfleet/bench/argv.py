"""A profile + an endpoint + one concurrency level + its seeds -> bench_serving's arguments (a list).

A cold profile's level is two runs of bench_serving: the warm-up, from its own seed, then the
measured requests with no warm-up of their own (bench_serving's built-in warm-up re-sends the
first measured prompt, which would find its prefix cached). A shared-prefix profile keeps
bench_serving's warm-up and passes --flush-cache: bench_serving empties the prefix cache after
the warm-up, so the measured requests hit only what they share among themselves.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flashfleet.bench.profiles import CACHE_SHARED, ArgValue, Profile

OUTPUT_NAME = "bench.jsonl"
WARMUP_OUTPUT_NAME = "warmup.jsonl"
# bench_serving caps each warm-up request at 32 new tokens (serving.py, `min(output_len, 32)`)
WARMUP_OUTPUT_CAP = 32
OUTPUT_LEN_KEYS = ("random-output-len", "sharegpt-output-len", "gsp-output-len")


def _words(value: ArgValue) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def flag_words(args: dict[str, ArgValue]) -> list[str]:
    out: list[str] = []
    for key, value in args.items():
        out.append(f"--{key}")
        if value is not True:  # a switch is the bare flag
            out.extend(_words(value))
    return out


def check_base_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"endpoint must be a base URL like http://HOST:PORT, not {base_url!r}")
    return url


def bench_args(
    profile: Profile, base_url: str, concurrency: int, *, seed: int, output_name: str = OUTPUT_NAME
) -> list[str]:
    """Arguments after `python -m sglang.benchmark.serving` for the measured requests of one level."""
    return [
        "--backend", profile.backend,
        "--base-url", check_base_url(base_url),
        "--dataset-name", profile.dataset,
        "--num-prompts", str(profile.num_prompts(concurrency)),
        "--max-concurrency", str(concurrency),
        "--output-file", output_name,
        "--tag", f"{profile.name}/c{concurrency}",
        "--disable-tqdm",
        *flag_words(_level_args(profile, concurrency, seed)),
    ]  # fmt: skip


def warmup_args(profile: Profile, base_url: str, concurrency: int, *, seed: int) -> list[str] | None:
    """Arguments of a cold level's separate warm-up run, or None (no warm-up, or a shared-prefix
    profile, whose warm-up is bench_serving's own)."""
    count = warmup_count(profile, concurrency)
    if profile.cache == CACHE_SHARED or not count:
        return None
    args: dict[str, ArgValue] = {k: v for k, v in profile.args.items() if k != "warmup-requests"}
    for key in OUTPUT_LEN_KEYS:
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            args[key] = min(value, WARMUP_OUTPUT_CAP)
    args["warmup-requests"] = 0
    args["seed"] = seed
    return [
        "--backend", profile.backend,
        "--base-url", check_base_url(base_url),
        "--dataset-name", profile.dataset,
        "--num-prompts", str(count),
        "--max-concurrency", str(concurrency),
        "--output-file", WARMUP_OUTPUT_NAME,
        "--tag", f"{profile.name}/c{concurrency}/warmup",
        "--disable-tqdm",
        *flag_words(args),
    ]  # fmt: skip


def warmup_count(profile: Profile, concurrency: int) -> int:
    """Warm-up requests of one level (bench_serving's default is 1)."""
    count = profile.warmup_requests(concurrency)
    return 1 if count is None else count


def _level_args(profile: Profile, concurrency: int, seed: int) -> dict[str, ArgValue]:
    args = dict(profile.args)
    if profile.cache == CACHE_SHARED:
        args["warmup-requests"] = warmup_count(profile, concurrency)
        args["flush-cache"] = True  # after bench_serving's warm-up, before the measured requests
    else:
        args["warmup-requests"] = 0  # warmed up by its own run, from its own seed
    args["seed"] = seed
    if profile.kind == "agentic":
        args["output-details"] = True  # per-request lengths and latencies for 1 / p90(e2e / length)
    return args
