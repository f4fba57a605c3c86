"""CLI start-up cost: the CPU each command that only prints or refuses takes, beside `python -c pass`.

Usage: uv run --group dev python benchmarks/cli_speed.py [--runs N] [--only WORD]
Target: every command here answers in under 0.5 s of CPU (user + system, the process and its
children) on a 2-core machine: `--help` of every command, the offline printers, and every refusal
(exit 2, one line) a user meets first. CPU, not wall time: the machine is shared, so wall time
measures the neighbours too. Prints figures and marks each row `ok` or `SLOW`; exit 1 if one is
slow or answers with another exit status than its row expects. `python -c pass` is the floor
no command can go under (the interpreter's own start).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 0.5
REPO = Path(__file__).resolve().parents[1]

# Offline commands that print (exit 0).
PRINTS = {
    "render": ["render", "--hardware", "gb300", "--strategy", "low-latency"],
    "render --format docker (pd)": [
        "render", "--hardware", "gb300", "--strategy", "high-throughput", "--topology", "pd",
        "--format", "docker",
    ],
    "matrix": ["matrix"],
    "matrix --format json": ["matrix", "--format", "json"],
    "options": ["options"],
    "diff": ["diff", "--hardware", "h200", "--strategy", "low-latency", "--set", "kv_dsa=bf16-tilelang"],
    "plan gb300-lowlat": ["plan", "gb300-lowlat"],
    "plan mi355x-k8s": ["plan", "mi355x-k8s"],
    "validate h200-replicas": ["validate", "h200-replicas"],
    "inventory mi355x-agentx": ["inventory", "mi355x-agentx"],
    "manifest mi355x-k8s": ["manifest", "mi355x-k8s"],
    "offers": ["offers"],
    "offers --gpu h200 --json": ["offers", "--gpu", "h200", "--json"],
    "status (never deployed)": ["status", "h200-replicas", "--runs-dir", "{tmp}/runs"],
    "ls": ["ls"],
}  # fmt: skip
# Refusals users meet first: each must exit 2 with one line.
REFUSALS = {
    "refused: render, unknown hardware": ["render", "--hardware", "h20", "--strategy", "low-latency"],
    "refused: unknown command": ["pln"],
    "refused: plan, missing stack file": ["plan", "Pulumi.nothere.yaml"],
    "refused: validate, unknown stack": ["validate", "nothere"],
    "refused: status, unknown stack": ["status", "nothere", "--runs-dir", "{tmp}/runs"],
    "refused: timeline, no run directory": ["timeline", "{tmp}/none"],
    "refused: bench, no endpoint": ["bench", "gb300-lowlat"],
    "refused: manifest, not a kubernetes stack": ["manifest", "gb300-lowlat"],
    "refused: logs, no lines": ["logs", "mi355x-agentx", "--lines", "0"],
    "refused: logs --follow, no run recorded": ["logs", "mi355x-agentx", "-f", "--runs-dir", "{tmp}/runs"],
    "refused: check, missing stack file": ["check", "Pulumi.nothere.yaml"],
    "refused: down, no terminal and no --yes": ["down", "mi355x-agentx", "--inventory", "{tmp}/none"],
    "refused: up, no Pulumi CLI": ["up", "h200-replicas"],
    "refused: configure, no inventory": ["configure", "mi355x-agentx", "--inventory", "{tmp}/none"],
    "refused: capacity, no credentials": ["capacity", "offers", "gb300-lowlat"],
    "refused: sweep, no credentials": ["sweep"],
    "refused: size, no boot log": ["size", "{tmp}/none.log"],
    "refused: compare, no runs": ["compare", "{tmp}/none"],
    "refused: new, bad hardware": ["new", "mine", "--hardware", "h20", "--stacks-dir", "{tmp}/new"],
    "refused: offers, unknown gpu": ["offers", "--gpu", "h20"],
    "refused: lock, unknown stack": ["lock", "nothere"],
}


def _commands() -> dict[str, tuple[list[str], int]]:
    from flashfleet.cli import COMMANDS

    rows: dict[str, tuple[list[str], int]] = {"--help": (["--help"], 0)}
    rows.update({f"{name} --help": ([name, "--help"], 0) for name in COMMANDS})
    rows.update({label: (argv, 0) for label, argv in PRINTS.items()})
    rows.update({label: (argv, 2) for label, argv in REFUSALS.items()})
    return rows


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """(CPU s, wall s, exit status, stderr) of one run; CPU: user + system of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, stdin=subprocess.DEVNULL, env=env, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.returncode, done.stderr.decode(errors="replace")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=None, help="only rows whose label contains this")
    args = parser.parse_args()
    exe = shutil.which("flashfleet") or ""
    prefix = [exe] if exe else [sys.executable, "-m", "flashfleet"]
    tmp = tempfile.mkdtemp(prefix="cli-speed-")
    env = dict(os.environ)
    env["FLASHFLEET_RUNS_DIR"] = f"{tmp}/runs"
    # no cloud, no Pulumi: what a fresh machine has (the refusals must be quick there)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not shutil.which("pulumi", path=p)
    )
    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(key, None)
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = f"{tmp}/none"
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance-metadata lookup for credentials

    floor = [_run([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)]
    floor_s = statistics.median(floor)
    print(f"{'command':<46} {'CPU s':>6} {'- floor':>7} {'wall s':>6}  verdict")
    print(f"{'python -c pass (the floor)':<46} {floor_s:6.3f} {0:7.3f} {'':>6}")
    slow = failed = 0
    for label, (words, expected) in _commands().items():
        if args.only and args.only not in label:
            continue
        argv = [a.replace("{tmp}", tmp) for a in words]
        cpus, walls = [], []
        for _ in range(args.runs):
            cpu, wall, code, err = _run([*prefix, *argv], env)
            if code != expected:
                print(f"{label:<46} exit {code}, expected {expected}: {err.strip()[:80]}")
                failed += 1
                break
            cpus.append(cpu)
            walls.append(wall)
        else:
            cpu_s = statistics.median(cpus)
            verdict = "ok" if cpu_s < BUDGET_S else "SLOW"
            slow += verdict == "SLOW"
            print(
                f"{label:<46} {cpu_s:6.3f} {cpu_s - floor_s:7.3f} {statistics.median(walls):6.3f}  {verdict}"
            )
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{slow} slow, {failed} with another exit status; "
        f"budget {BUDGET_S} s CPU, {args.runs} runs each (median)"
    )
    return 1 if slow or failed else 0


if __name__ == "__main__":
    sys.exit(main())
