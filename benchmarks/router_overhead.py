"""What the real routers cost on the request path: one load profile (N concurrent clients, M
streaming chat requests in all) sent straight to one stand-in worker, through sglang-router 0.3.2
(Rust, `--policy round_robin`) and through SMG 1.13.0 (`smg launch`, the gateway that left
SGLang's tree, same flags) in front of that same worker, on loopback, the three paths' rounds
alternating in one run; medians over the rounds compared.

The worker is tests/serve/standin_sglang.py in this process (its first token after --ttft-ms,
then one every --itl-ms); the router comes from the oracle venv (scripts/setup.d/10-sglang-oracle.sh)
and is started by tests/serve/real_router.py. TTFT is the time to the first content delta of a
stream, as bench_serving measures it; throughput is output tokens per second of the round's wall
time. On a small shared machine the clients, the worker and the router share the cores: the
ratios say what the router adds there, not what it adds beside a GPU server.

Prints figures and ratios measured side by side in one run; asserts nothing (speed targets live
here, not in tests).

Usage: uv run --group dev python benchmarks/router_overhead.py [--clients 8] [--requests 64]
       [--max-tokens 32] [--rounds 3] [--format json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from tests.serve.real_router import SMG_LAUNCH, real_router  # noqa: E402
from tests.serve.standin_sglang import StandinServer, StandinState  # noqa: E402

MODEL = StandinState().model  # SMG routes by model id (404 for one no worker serves)


def one_stream(url: str, i: int, max_tokens: int) -> tuple[float, int]:
    """One streaming chat request: (seconds to the first content delta, output tokens)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"request {i}: say something"}],
            "max_tokens": max_tokens, "stream": True}  # fmt: skip
    req = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start, ttft, tokens = time.perf_counter(), None, 0
    with urllib.request.urlopen(req, timeout=120) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if "error" in chunk:
                raise RuntimeError(f"request {i}: {chunk['error']}")
            if any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                ttft = ttft if ttft is not None else time.perf_counter() - start
            tokens = chunk.get("usage", {}).get("completion_tokens", tokens)
    if ttft is None:
        raise RuntimeError(f"request {i}: no content came back")
    return ttft, tokens


def round_of(url: str, clients: int, requests: int, max_tokens: int) -> dict[str, float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda i: one_stream(url, i, max_tokens), range(requests)))
    wall = time.perf_counter() - start
    return {
        "p50_ttft_ms": statistics.median(t for t, _ in results) * 1000,
        "tokens_per_s": sum(n for _, n in results) / wall,
        "requests_per_s": requests / wall,
    }


def median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=2.0)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    state = StandinState(ttft_s=args.ttft_ms / 1000, itl_s=args.itl_ms / 1000)
    load = (args.clients, args.requests, args.max_tokens)
    with StandinServer(state) as worker, tempfile.TemporaryDirectory() as tmp:
        router_args = ["--worker-urls", worker.url, "--policy", "round_robin"]
        with (
            real_router(router_args, expect=[worker.url], log=Path(tmp) / "sglang-router.log") as old,
            real_router(
                router_args, expect=[worker.url], log=Path(tmp) / "smg.log", launch=SMG_LAUNCH
            ) as smg,
        ):
            paths = {"direct": worker.url, "sglang-router": old.url, "smg": smg.url}
            for url in paths.values():  # warm-up: connection pools, the worker's threads
                round_of(url, *load)
            rounds: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
            for _ in range(args.rounds):
                for name, url in paths.items():
                    rounds[name].append(round_of(url, *load))
    medians = {name: median_of(r) for name, r in rounds.items()}
    d = medians["direct"]
    ratios = {
        name: {
            "ttft_ratio": m["p50_ttft_ms"] / d["p50_ttft_ms"],
            "throughput_ratio": m["tokens_per_s"] / d["tokens_per_s"],
            "added_p50_ttft_ms": m["p50_ttft_ms"] - d["p50_ttft_ms"],
        }
        for name, m in medians.items()
        if name != "direct"
    }
    profile = {"clients": args.clients, "requests": args.requests, "max_tokens": args.max_tokens,
               "rounds": args.rounds, "ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms}  # fmt: skip
    if args.format == "json":
        print(json.dumps({"profile": profile, "paths": medians, "against_direct": ratios}, indent=2))
        return 0
    print(" ".join(f"{k}={v}" for k, v in profile.items()))
    print(f"{'path':<14} {'p50 TTFT ms':>12} {'tokens/s':>10} {'requests/s':>11}")
    for name, row in medians.items():
        print(
            f"{name:<14} {row['p50_ttft_ms']:12.1f} {row['tokens_per_s']:10.0f} {row['requests_per_s']:11.1f}"
        )
    for name, r in ratios.items():
        print(f"{name}/direct: p50 TTFT x{r['ttft_ratio']:.2f} (+{r['added_p50_ttft_ms']:.1f} ms), "
              f"throughput x{r['throughput_ratio']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
