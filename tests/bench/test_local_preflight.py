"""`bench --local` fails fast: no load generator here, or nothing at the --endpoint given, is
exit 2 with one line in seconds and no results folder; readiness asks the endpoint given, not
the stack file's example address."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from flashfleet.bench.node_facts import stack_deployment
from flashfleet.cli import bench as cli_bench
from flashfleet.cli import main
from tests.bench.fakes import FakeCluster
from tests.serve.standin_sglang import StandinServer

ROOT = Path(__file__).resolve().parents[2]
STACK = "mi355x-agentx"  # an existing-hosts stack whose file still lists 192.0.2.10


@pytest.fixture
def agentx(monkeypatch):
    cluster = FakeCluster(deployment_of=lambda stack: stack_deployment(STACK, ROOT / "stacks"))
    monkeypatch.setattr(cli_bench, "stack_cluster", lambda _stacks: cluster)
    assert cluster.deployment(STACK).recipe.addresses == ["192.0.2.10"]


@pytest.fixture
def stub_client(tmp_path, monkeypatch):
    """An interpreter that imports sglang.benchmark.serving (a stub that, run, exits at once)."""
    site = tmp_path / "site"
    (site / "sglang" / "benchmark").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "benchmark" / "__init__.py").write_text("")
    (site / "sglang" / "benchmark" / "serving.py").write_text(
        "if __name__ == '__main__':\n    raise SystemExit('stub load generator')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))


def _bench(results: Path, endpoint: str, *extra: str) -> tuple[int, float]:
    t0 = time.monotonic()
    code = main(["bench", STACK, "--local", "--python", sys.executable, "--endpoint", endpoint,
                 "--profile", "sweep", "--concurrency", "1", "--results", str(results), *extra])  # fmt: skip
    return code, time.monotonic() - t0


def test_no_load_generator_here_is_exit_2_in_one_line_and_no_folder(tmp_path, agentx, capsys, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    results = tmp_path / "results"
    with StandinServer() as server:  # a server that answers: the client is what is missing
        code, took = _bench(results, server.url)
        asked = server.state.paths()
    assert code == 2
    assert took < 5
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "cannot run sglang.benchmark.serving" in lines[0]
    assert "No module named 'sglang'" in lines[0]  # what is missing
    assert "pip install sglang==" in lines[0]  # and how to get it
    assert not results.exists()
    assert asked == []  # checked before anything was asked of the server


def test_an_unreachable_endpoint_is_exit_2_in_one_line_and_no_folder(tmp_path, agentx, stub_client, capsys):
    results = tmp_path / "results"
    code, took = _bench(results, "http://127.0.0.1:9")
    assert code == 2
    assert took < 5
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("flashfleet bench: --endpoint http://127.0.0.1:9: nothing answers there")
    assert "192.0.2.10" not in lines[0]
    assert not results.exists()


def test_readiness_is_asked_of_the_endpoint_given_not_the_stack_files_address(
    tmp_path, agentx, stub_client, capsys
):
    with StandinServer() as server:
        code, took = _bench(tmp_path / "results", server.url, "--ready-timeout", "20")
        asked = server.state.paths()
    err = capsys.readouterr().err
    assert "/server_info" in asked  # the named server was checked
    assert "not ready" not in err
    assert "192.0.2.10" not in err
    assert took < 20  # no wait on an address nothing answers at
    assert code == 3  # the stub load generator measured nothing: a failed run, kept with its cause
    assert "stub load generator" in err


def test_a_load_generator_missing_one_of_its_imports_is_found_before_the_run(
    tmp_path, agentx, stub_client, capsys, monkeypatch
):
    site = Path(os.environ["PYTHONPATH"])
    (site / "sglang" / "benchmark" / "serving.py").write_text("import transformers_not_installed_here\n")
    results = tmp_path / "results"
    code, took = _bench(results, "http://127.0.0.1:9")
    assert code == 2
    assert took < 5
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "No module named 'transformers_not_installed_here'" in line
    assert not results.exists()
