"""Writes examples/runs/: two real `flashfleet bench` runs, for trying `compare` offline.

Each run is the real sglang 0.5.23 `bench_serving` (the parser-oracle venv, with the tokenizer
shim of tests/bench/oracle_site) against the repository's stand-in OpenAI server on loopback,
once with 2 ms and once with 4 ms between output tokens. They show the tool's output, not GPU
figures. Run from the repository root after scripts/setup.d/10-sglang-oracle.sh:
`uv run python scripts/example_runs.py`. Plots are left out (compare draws its own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "serve"))
from standin_sglang import StandinServer, StandinState  # noqa: E402

OUT = REPO / "examples" / "runs"
RUNS = {"standin-itl2ms": 0.002, "standin-itl4ms": 0.004}


def main() -> int:
    oracle = REPO / ".venv-oracle" / "bin" / "python"
    if not oracle.exists():
        print(f"no parser-oracle venv at {oracle}: run scripts/setup.d/10-sglang-oracle.sh", file=sys.stderr)
        return 2
    shutil.rmtree(OUT, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        # `python3` on PATH is the oracle with its shim: the runs record that name, no path
        bin_dir = Path(scratch, "bin")
        bin_dir.mkdir()
        (bin_dir / "python3").write_text(
            f'#!/bin/sh\nPYTHONPATH={REPO / "tests/bench/oracle_site"} exec {oracle} "$@"\n'
        )
        (bin_dir / "python3").chmod(0o755)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "NO_PROXY": "127.0.0.1",
            "FLASHFLEET_RUNS_DIR": ".runner",
        }
        for stack, itl in RUNS.items():
            with StandinServer(StandinState(itl_s=itl)) as server:
                argv = [
                    str(Path(sys.executable).with_name("flashfleet")), "bench", stack, "--local",
                    "--python", "python3", "--endpoint", server.url, "--server", f"server={server.url}",
                    "--profile", "sweep", "--concurrency", "1,4", "--num-prompts", "8",
                    "--hardware", "h200", "--strategy", "low-latency", "--results", "runs",
                ]  # fmt: skip
                subprocess.run(argv, cwd=scratch, env=env, check=True)
        shutil.copytree(Path(scratch, "runs"), OUT)
        for path in OUT.rglob("*"):
            if path.suffix == ".png":
                path.unlink()  # compare draws its own
            elif path.is_file():  # the scratch folder's name is this machine's, not the run's
                path.write_text(path.read_text(encoding="utf-8").replace(scratch, "."), encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {', '.join(sorted(RUNS))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
