"""The bench client stand-in (tests/bench/node/bench_client.py, what the bench test hosts run in
place of `python -m sglang.benchmark.serving`) parses its argv with the real parser's flags,
switches and choices (node/bench_serving_flags.json): what the real one refuses, it refuses with
exit 2 and argparse's error line; what flashfleet sends for every profile, it takes. The oracle
tests check the shipped list against the pinned sglang's own parser and the refusal against it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flashfleet.bench.argv import bench_args
from flashfleet.bench.profiles import load_profiles
from tests.bench.conftest import ORACLE, ORACLE_SITE

NODE = Path(__file__).with_name("node")
CLIENT = NODE / "bench_client.py"
SHIPPED = NODE / "bench_serving_flags.json"
REFUSED = [
    (["--kv-cache-dtype", "fp9"], "error: unrecognized arguments: --kv-cache-dtype fp9"),
    (["--backend", "sglang-grpc"], "error: argument --backend: invalid choice: 'sglang-grpc'"),
    (["--num-prompts", "many"], "error: argument --num-prompts: invalid int value: 'many'"),
    (["--rust-worker-threads", "2"], "error: --rust-worker-threads requires --rust-client"),
]


def _run(
    argv: list[str], command: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *argv], capture_output=True, text=True, timeout=120, check=False, env=env
    )


@pytest.mark.parametrize(("argv", "error"), REFUSED)
def test_the_stand_in_refuses_what_bench_serving_refuses(argv: list[str], error: str) -> None:
    done = _run(argv, [sys.executable, str(CLIENT)])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"bench_client.py: {error}")
    assert done.stdout == ""  # refused before any request


def test_the_stand_in_parses_what_flashfleet_sends_for_every_profile() -> None:
    sys.path.insert(0, str(NODE))
    try:
        import bench_client  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(NODE))
    for profile in load_profiles().values():
        argv = bench_args(profile, "http://127.0.0.1:30000", 4, seed=1)
        parsed = bench_client.args(argv)
        assert parsed.max_concurrency == 4, profile.name
        assert parsed.base_url == "http://127.0.0.1:30000"


def test_the_shipped_flag_list_is_the_pinned_bench_serving_parsers(tmp_path: Path) -> None:
    fresh = tmp_path / "flags.json"
    done = _run(
        [str(fresh)],
        [str(ORACLE), str(NODE / "bench_serving_flags.py")],
        env={"PYTHONPATH": str(ORACLE_SITE)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(fresh.read_text()) == json.loads(SHIPPED.read_text()), (
        "stale: run node/bench_serving_flags.py"
    )


@pytest.mark.parametrize(("argv", "error"), REFUSED)
def test_the_real_bench_serving_refuses_the_same_argv_the_same_way(argv: list[str], error: str) -> None:
    done = _run(argv, [str(ORACLE), "-m", "sglang.benchmark.serving"], env={"PYTHONPATH": str(ORACLE_SITE)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].split(": ", 1)[1].startswith(error)
