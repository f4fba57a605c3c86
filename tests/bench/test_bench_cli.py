"""`flashfleet bench` through the CLI: exit codes, the gate, and --destroy through the cluster
(a fake cluster with a fake teardown and a fake runner, where the CLI passes the stack's own)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from flashfleet.bench.profiles import load_profiles
from flashfleet.bench.runner import Completed, Invocation, LocalRunner
from flashfleet.cli import bench as cli_bench
from flashfleet.cli import main
from tests.bench.fakes import FakeCluster, FakeRunner

URL = "http://127.0.0.1:9"


class FakeTeardown:
    def __init__(self, fail: bool = False) -> None:
        self.stacks: list[str] = []
        self.fail = fail

    def __call__(self, stack: str) -> None:
        self.stacks.append(stack)
        if self.fail:
            raise RuntimeError("pulumi destroy: resource still in use")


@pytest.fixture
def with_cluster(monkeypatch):
    def install(cluster: FakeCluster) -> None:
        monkeypatch.setattr(cli_bench, "stack_cluster", lambda _stacks: cluster)

    return install


def bench(tmp_path: Path, *extra: str) -> int:
    return main(
        ["bench", "stk", "--profile", "sweep", "--concurrency", "1,4", "--results", str(tmp_path), *extra]
    )


def test_ok_run_exit_0_and_results(tmp_path, with_cluster, capsys):
    runner = FakeRunner()
    with_cluster(FakeCluster(runner_of=lambda stack: runner))
    assert bench(tmp_path, "--endpoint", URL, "--hourly-price", "10", "--node-count", "2") == 0
    assert len(runner.calls) == 2
    assert all(isinstance(c.argv, tuple) for c in runner.calls)
    out = capsys.readouterr().out
    assert "c=4:" in out
    (run_dir,) = (tmp_path / "stk").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cost"]["hourly_usd"] == 20.0
    assert summary["gate"] is None


def test_gate_failure_exit_1(tmp_path, with_cluster, capsys):
    with_cluster(FakeCluster(runner_of=lambda stack: FakeRunner()))
    assert bench(tmp_path, "--endpoint", URL, "--threshold", "min_output_throughput=200") == 1
    out = capsys.readouterr().out
    assert "FAIL min_output_throughput c=1" in out
    assert "PASS min_output_throughput c=4" in out
    (run_dir,) = (tmp_path / "stk").iterdir()
    assert json.loads((run_dir / "summary.json").read_text())["gate"]["passed"] is False
    assert "## Gate: FAIL" in (run_dir / "report.md").read_text()


def test_gate_pass_exit_0(tmp_path, with_cluster):
    with_cluster(FakeCluster(runner_of=lambda stack: FakeRunner()))
    assert bench(tmp_path, "--endpoint", URL, "--threshold", "min_output_throughput=50") == 0


def test_destroy_after_a_failing_benchmark(tmp_path, with_cluster, capsys):
    teardown = FakeTeardown()
    failing = FakeRunner(lambda c: Completed(1, "Traceback: CUDA out of memory\n", ""))
    with_cluster(
        FakeCluster(endpoint_of=lambda stack: URL, teardown_of=teardown, runner_of=lambda stack: failing)
    )
    assert bench(tmp_path, "--destroy") == 3
    assert teardown.stacks == ["stk"]
    assert "concurrency 1 failed: bench_serving exited with 1" in capsys.readouterr().err
    (run_dir,) = (tmp_path / "stk").iterdir()
    assert "CUDA out of memory" in (run_dir / "raw" / "c0001.log").read_text()


def test_destroy_when_the_runner_raises(tmp_path, with_cluster):
    teardown = FakeTeardown()

    def broken(invocation: Invocation) -> Completed:
        raise ConnectionError("ssh: node-0 unreachable")

    with_cluster(
        FakeCluster(endpoint_of=lambda stack: URL, teardown_of=teardown, runner_of=lambda stack: broken)
    )
    assert bench(tmp_path, "--destroy") == 3
    assert teardown.stacks == ["stk"]


def test_destroy_when_the_endpoint_lookup_raises(tmp_path, with_cluster):
    teardown = FakeTeardown()

    def no_outputs(stack: str) -> str:
        raise KeyError("stack output 'endpoint' missing")

    with_cluster(
        FakeCluster(endpoint_of=no_outputs, teardown_of=teardown, runner_of=lambda stack: FakeRunner())
    )
    with pytest.raises(KeyError):
        bench(tmp_path, "--destroy")
    assert teardown.stacks == ["stk"]


def test_destroy_after_success_and_not_without_the_flag(tmp_path, with_cluster):
    teardown = FakeTeardown()
    with_cluster(
        FakeCluster(endpoint_of=lambda stack: URL, teardown_of=teardown, runner_of=lambda stack: FakeRunner())
    )
    assert bench(tmp_path) == 0
    assert teardown.stacks == []
    assert bench(tmp_path, "--destroy") == 0
    assert teardown.stacks == ["stk"]


def test_failed_teardown_exit_4(tmp_path, with_cluster, capsys):
    with_cluster(
        FakeCluster(
            endpoint_of=lambda stack: URL,
            teardown_of=FakeTeardown(fail=True),
            runner_of=lambda s: FakeRunner(),
        )
    )
    assert bench(tmp_path, "--destroy") == 4
    assert "may still be running" in capsys.readouterr().err
    assert len(list((tmp_path / "stk").iterdir())) == 1  # the results were kept


def test_no_endpoint_and_none_in_the_outputs_is_a_usage_error(tmp_path, with_cluster, capsys):
    runner = FakeRunner()
    with_cluster(FakeCluster(runner_of=lambda stack: runner))  # its endpoint lookup refuses
    assert bench(tmp_path) == 2
    err = capsys.readouterr().err
    assert "--endpoint" in err
    assert err.count("\n") == 1
    assert runner.calls == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "nope"], "unknown profile"),
        (["--concurrency", "4,x"], "--concurrency"),
        (["--threshold", "max_p99_ttft_ms"], "NAME=NUMBER"),
        (["--threshold", "max_p99_ttf_ms=3"], "unknown threshold"),
        (["--endpoint", "127.0.0.1:30000"], "base URL"),
        (["--hardware", "h200"], "go together"),
        (["--hardware", "h300", "--strategy", "low-latency"], "unknown hardware"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, with_cluster, capsys, args, message):
    with_cluster(FakeCluster(runner_of=lambda stack: FakeRunner()))
    assert main(["bench", "stk", "--endpoint", URL, "--results", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_list_profiles(capsys):
    assert main(["bench", "--list-profiles"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["chat-1k1k", "agentic-long", "multimodal", "sweep", "inferencex-8k1k"]


def test_list_profiles_columns_line_up(capsys):
    assert main(["bench", "--list-profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    profiles = load_profiles()
    assert len(lines) == len(profiles)
    # every profile's backend, dataset, levels and description in its own row, each column starting
    # at one offset in every row (the longest level list once pushed its description out of line)
    starts = []
    for line, (name, prof) in zip(lines, profiles.items(), strict=True):
        levels = "c=" + ",".join(map(str, prof.concurrency))
        assert line.startswith(name)
        assert line.endswith(prof.description)
        at, end = [], len(name)
        for cell in (prof.backend, prof.dataset, levels, prof.description):
            start = line.index(cell, end)
            assert line[end:start] == " " * (start - end), line  # only a gap before it...
            assert start - end >= 2, line  # ...of two spaces at least
            at.append(start)
            end = start + len(cell)
        starts.append(at)
    assert all(at == starts[0] for at in starts), starts


def test_local_runner_runs_an_argv_list_and_reads_the_output(tmp_path):
    script = "import sys; open(sys.argv[1], 'w').write('{\"x\": 1}\\n'); print('hi; rm -rf /')"
    done = LocalRunner()(Invocation(("python3", "-c", script, "bench.jsonl"), "bench.jsonl", timeout_s=30))
    assert (done.returncode, done.jsonl, done.log) == (0, '{"x": 1}\n', "hi; rm -rf /\n")
    missing = LocalRunner()(Invocation(("/nonexistent/python",), "bench.jsonl"))
    assert missing.runner_error is not None
    relative = LocalRunner()(
        Invocation((os.path.relpath(sys.executable), "-c", "print(1)"), "o", timeout_s=30)
    )
    assert (relative.returncode, relative.log) == (0, "1\n")  # resolved before the child changes directory
    slow = LocalRunner()(Invocation(("python3", "-c", "import time; time.sleep(5)"), "o", timeout_s=0.5))
    assert slow.timed_out
