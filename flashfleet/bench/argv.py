"""A profile + an endpoint + one concurrency level -> bench_serving's arguments (a list)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flashfleet.bench.profiles import ArgValue, Profile

OUTPUT_NAME = "bench.jsonl"


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
    profile: Profile, base_url: str, concurrency: int, output_name: str = OUTPUT_NAME
) -> list[str]:
    """Arguments after `python -m sglang.benchmark.serving` for one level of the profile."""
    return [
        "--backend", profile.backend,
        "--base-url", check_base_url(base_url),
        "--dataset-name", profile.dataset,
        "--num-prompts", str(profile.num_prompts(concurrency)),
        "--max-concurrency", str(concurrency),
        "--output-file", output_name,
        "--tag", f"{profile.name}/c{concurrency}",
        "--disable-tqdm",
        *flag_words(_level_args(profile, concurrency)),
    ]  # fmt: skip


def _level_args(profile: Profile, concurrency: int) -> dict[str, ArgValue]:
    args = dict(profile.args)
    if profile.warmup_per_concurrency:
        args["warmup-requests"] = profile.warmup_per_concurrency * concurrency
    if profile.kind == "agentic":
        args["output-details"] = True  # per-request lengths and latencies for 1 / p90(e2e / length)
    return args
