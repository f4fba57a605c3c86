"""CLI start-up and run time: prints figures, asserts nothing (speed targets live here, not in tests).

Usage: uv run --group dev python benchmarks/cli_speed.py [--runs N]
Target: `flashfleet render` and `flashfleet matrix` well under 0.5 s on a 2-core machine, and
every refusal (REFUSALS: exit 2, one line) under 0.5 s: a refusal loads no SDK it does not need.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "render": ["render", "--hardware", "gb300", "--strategy", "low-latency"],
    "render --format docker": [
        "render",
        "--hardware",
        "gb300",
        "--strategy",
        "high-throughput",
        "--topology",
        "pd",
        "--format",
        "docker",
    ],
    "matrix": ["matrix"],
    "matrix --format json (with disabled choices)": ["matrix", "--format", "json"],
    "plan gb300-lowlat": ["plan", "gb300-lowlat"],
}
# Refusals users meet first: each must exit 2 (anything else is reported as failed).
REFUSALS = {
    "refused: render, unknown hardware": ["render", "--hardware", "h20", "--strategy", "low-latency"],
    "refused: plan, missing stack file": ["plan", "Pulumi.nothere.yaml"],
    "refused: status, no Pulumi CLI and no run": ["status", "gb300-lowlat", "--runs-dir", "/nonexistent"],
    "refused: timeline, no run directory": ["timeline", "/nonexistent"],
    "refused: bench, no endpoint": ["bench", "gb300-lowlat"],
    "refused: manifest, not a kubernetes stack": ["manifest", "gb300-lowlat"],
    "refused: logs, no lines": ["logs", "mi355x-agentx", "--lines", "0"],
    "refused: check, missing stack file": ["check", "Pulumi.nothere.yaml"],
    "refused: down, no terminal and no --yes": ["down", "mi355x-agentx", "--inventory", "/nonexistent"],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    exe = shutil.which("flashfleet") or sys.executable
    prefix = [exe] if exe != sys.executable else [sys.executable, "-m", "flashfleet"]
    print(f"{'command':<48} {'median s':>9} {'min s':>7} {'max s':>7}  maxrss MiB")
    expected = {**dict.fromkeys(COMMANDS, 0), **dict.fromkeys(REFUSALS, 2)}
    for label, argv in {**COMMANDS, **REFUSALS}.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(
                [*prefix, *argv], capture_output=True, check=False, stdin=subprocess.DEVNULL
            )
            times.append(time.perf_counter() - start)
            if done.returncode != expected[label]:
                print(f"{label:<48} failed: {done.stderr.decode().strip()[:80]}")
                break
        else:
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(
                f"{label:<48} {statistics.median(times):9.3f} {min(times):7.3f} {max(times):7.3f}  {rss:8.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
