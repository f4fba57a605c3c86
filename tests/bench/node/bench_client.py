"""Stand-in for `python -m sglang.benchmark.serving` (sglang backend) on a bench test host.

Sends --num-prompts streaming /generate requests, --max-concurrency at a time, to --base-url,
times each token as it arrives, and appends one result line with the keys and statistics
sglang 0.5.23's benchmark writes to --output-file; prints its summary table. Exits 1 when no
request succeeded, like a benchmark that could not reach its server.
"""

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

FLAGS_FILE = "bench_serving_flags.json"  # the real parser's flags (bench_serving_flags.py)


def parser() -> argparse.ArgumentParser:
    """bench_serving's own flags, switches and choices (the shipped list beside this file): an
    unknown flag, a missing value or a choice outside the list exits 2 with argparse's usage and
    error line, as `python -m sglang.benchmark.serving` does."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), FLAGS_FILE)) as f:
        flags = json.load(f)
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    used = {"--num-prompts", "--max-concurrency", "--random-input-len", "--random-output-len"}
    for flag in sorted(used):  # the values this stand-in reads, typed as there
        p.add_argument(flag, type=int, default=8)
    for flag, spec in flags.items():
        if flag in used:
            continue
        if spec["switch"]:
            p.add_argument(flag, action="store_true")
        else:
            p.add_argument(flag, nargs=spec["nargs"], choices=spec["choices"])
    return p


def args(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    parsed = p.parse_args(sys.argv[1:] if argv is None else argv)
    if parsed.rust_worker_threads is not None and not parsed.rust_client:
        p.error("--rust-worker-threads requires --rust-client")  # the real cli_main's check
    return parsed


def one(a: argparse.Namespace) -> dict | None:
    body = {
        "input_ids": [1] * a.random_input_len,
        "stream": True,
        "sampling_params": {"max_new_tokens": a.random_output_len, "ignore_eos": True},
    }
    req = urllib.request.Request(
        f"{a.base_url}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    start, times, tokens = time.perf_counter(), [], 0
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                now_tokens = json.loads(line[6:])["meta_info"]["completion_tokens"]
                if now_tokens > tokens:
                    times.append(time.perf_counter())
                    tokens = now_tokens
    except OSError:
        return None
    return {"start": start, "times": times, "tokens": tokens}


def stats(name: str, values: list[float]) -> dict:
    v = sorted(values) or [0.0]
    pick = lambda q: v[min(len(v) - 1, round(q * (len(v) - 1)))]  # noqa: E731
    return {
        f"mean_{name}": statistics.fmean(v),
        f"median_{name}": statistics.median(v),
        f"std_{name}": statistics.pstdev(v),
        f"p90_{name}": pick(0.9),
        f"p95_{name}": pick(0.95),
        f"p99_{name}": pick(0.99),
    }


def main() -> int:
    a = args()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.max_concurrency) as pool:
        done = [r for r in pool.map(lambda _: one(a), range(a.num_prompts)) if r and r["times"]]
    duration = time.perf_counter() - t0
    out_tokens = sum(r["tokens"] for r in done)
    ttft = [(r["times"][0] - r["start"]) * 1000 for r in done]
    itl = [(b - x) * 1000 for r in done for x, b in zip(r["times"], r["times"][1:], strict=False)]
    tpot = [(r["times"][-1] - r["times"][0]) * 1000 / max(1, r["tokens"] - 1) for r in done]
    e2e = [(r["times"][-1] - r["start"]) * 1000 for r in done]
    record = {
        "tag": a.tag,
        "backend": a.backend,
        "dataset_name": a.dataset_name,
        "request_rate": float("inf"),
        "max_concurrency": a.max_concurrency,
        "random_input_len": a.random_input_len,
        "random_output_len": a.random_output_len,
        "duration": duration,
        "completed": len(done),
        "total_input_tokens": len(done) * a.random_input_len,
        "total_output_tokens": out_tokens,
        "total_output_tokens_retokenized": out_tokens,
        "request_throughput": len(done) / duration,
        "input_throughput": len(done) * a.random_input_len / duration,
        "output_throughput": out_tokens / duration,
        "total_throughput": (len(done) * a.random_input_len + out_tokens) / duration,
        "concurrency": sum(e2e) / 1000 / duration,
        "max_concurrent_requests": a.max_concurrency,
        **stats("ttft_ms", ttft),
        **stats("tpot_ms", tpot),
        **stats("itl_ms", itl),
        **stats("e2e_latency_ms", e2e),
    }
    print("============ Serving Benchmark Result ============")
    print(f"{'Successful requests:':<40}{len(done):<10}")
    print(f"{'Output token throughput (tok/s):':<40}{record['output_throughput']:<10.2f}")
    if not done:
        print("All requests failed", flush=True)
        return 1
    with open(a.output_file, "a") as f:
        f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
