"""`flashfleet size` end to end: output, stored stack options, and exit 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.recipes import render
from flashfleet.sizing.stack_writer import read_options
from tests.sizing.sizing_logs import MAMBA_LINE, SPECULATIVE, WORKED_EXAMPLE

BASE = ["size", "--boot-log", str(WORKED_EXAMPLE)]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main([*argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in captured.err
    assert captured.out == ""
    return err


def test_json_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, [*BASE, "--avg-request-len", "9216", "--radix-mode", "extra_buffer_lazy"])
    assert out["mamba_full_memory_ratio"] == 1.78
    assert "max_mamba_cache_size" not in out
    assert out["flag"] == "--mamba-full-memory-ratio 1.78"
    assert out["token_equiv"] == pytest.approx(4080.5, abs=0.5)
    pools = out["pools"]
    assert pools["mamba"]["max_mamba_cache_size"] == 257
    assert pools["kv"]["tokens"] == 1167552
    assert pools["capped"] == {"capped_to": 51, "max_mamba_cache_size": 257, "slots_per_request": 5}
    assert out["predicted"] == {
        "mamba_slots": 347,
        "state_gib": 18.23,
        "kv_tokens": 800303,
        "kv_gib": 10.3,
        "kda_request_cap": 86,
        "kv_request_cap": 86,
        "max_running_requests": 86,
        "limiting_pool": "balanced",
    }


def test_text_report_says_which_pool_limits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--avg-request-len", "9216"]) == 0
    out = capsys.readouterr().out
    assert "56.4 MB/slot" in out
    assert "13.8 KB/token" in out
    assert "recommend: --mamba-full-memory-ratio 2.22" in out  # 5 * 4080.5 / 9216 = 2.2139 -> up
    assert "now:       257 slots -> 51 requests by state, 126 by KV: the KDA state pool limits" in out
    assert "capped max_running_requests at 51 because of the KDA state pool" in out


def test_pin_below_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, [*BASE, "--avg-request-len", "262144", "--concurrency", "4"])
    assert out["max_mamba_cache_size"] == 20
    assert "mamba_full_memory_ratio" not in out
    assert out["target_ratio"] == pytest.approx(0.0778, abs=0.0001)


def test_pin_without_concurrency_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, [*BASE, "--avg-request-len", "262144"])
    assert "--concurrency" in err
    assert err.startswith("flashfleet size: the balanced ratio is 0.078")


def test_strategy_sets_draft_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["size", "--boot-log", str(SPECULATIVE), "--avg-request-len", "16384"]
    low = _json(capsys, [*argv, "--strategy", "low-latency"])
    explicit = _json(capsys, [*argv, "--draft-tokens", "6"])
    assert low["mamba_full_memory_ratio"] == explicit["mamba_full_memory_ratio"] == 1.27
    high = _json(capsys, [*argv, "--strategy", "high-throughput"])
    assert high["workload"]["draft_tokens"] == 0
    err = _refused(capsys, argv)
    assert "speculative decoding: pass --strategy or --draft-tokens" in err


def test_write_stores_the_option_and_render_uses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = tmp_path / "Pulumi.bench.yaml"
    stack.write_text("# bench\nconfig:\n  flashfleet:stack:\n    options:\n      max_mamba_cache_size: 40\n")
    argv = [*BASE, "--avg-request-len", "9216", "--stack", "bench", "--stacks-dir", str(tmp_path)]
    assert main(argv) == 0
    assert "would store (add --write) mamba_full_memory_ratio: 2.22" in capsys.readouterr().out
    assert read_options(tmp_path, "bench") == {"max_mamba_cache_size": 40}  # dry run wrote nothing
    out = _json(capsys, [*argv, "--write"])
    assert out["stack"]["written"] is True
    assert read_options(tmp_path, "bench") == {"mamba_full_memory_ratio": 2.22}
    assert stack.read_text().startswith("# bench\n")
    argv_rendered = (
        render("h200", "high-throughput", overrides=read_options(tmp_path, "bench")).processes[0].argv
    )
    assert argv_rendered[argv_rendered.index("--mamba-full-memory-ratio") + 1] == "2.22"


def test_host_tier_check(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--avg-request-len", "9216", "--hicache-size", "180", "--ranks-per-node", "4"]
    out = _json(capsys, [*argv, "--host-memory-gb", "1024"])
    assert out["host_tier"] == {
        "hicache_size_gb": 180.0,
        "ranks_per_node": 4,
        "per_rank_gb": 187.5,
        "node_need_gb": 750.0,
        "host_memory_gb": 1024.0,
        "fits": True,
    }
    err = _refused(capsys, [*argv, "--host-memory-gb", "512"])
    assert "750.0 GB, but the node has 512 GB" in err
    assert "needs --hicache-size, --ranks-per-node and --host-memory-gb" in _refused(capsys, argv)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--avg-request-len", "0"], "--avg-request-len '0': must be positive"),
        (["--avg-request-len", "-9216"], "must be positive"),
        (["--avg-request-len", "lots"], "--avg-request-len 'lots': must be a number"),
        (
            ["--avg-request-len", "9216", "--concurrency", "1.5"],
            "--concurrency '1.5': must be a whole number",
        ),
        (["--avg-request-len", "9216", "--dcp-size", "0"], "--dcp-size '0': must be >= 1"),
        (["--avg-request-len", "9216", "--write"], "--write needs --stack NAME"),
        (["--avg-request-len", "9216", "--stack", "nope", "--stacks-dir", "."], "unknown stack 'nope'"),
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert message in _refused(capsys, [*BASE, *extra])


def test_bad_logs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_mamba = tmp_path / "only-mamba.log"
    only_mamba.write_text(f"[2026-11-03 10:12:02 TP0] {MAMBA_LINE}\n")
    err = _refused(capsys, ["size", "--boot-log", str(only_mamba), "--avg-request-len", "9216"])
    assert "boot log has no 'KV Cache is allocated.' line" in err
    garbled = tmp_path / "garbled.log"
    garbled.write_text(
        WORKED_EXAMPLE.read_text().replace("ssm_state size: 13.04GB", "ssm_state size: 13,04GB")
    )
    err = _refused(capsys, ["size", "--boot-log", str(garbled), "--avg-request-len", "9216"])
    assert "cannot read ssm_state size from '13,04'" in err
    missing = tmp_path / "absent.log"
    err = _refused(capsys, ["size", "--boot-log", str(missing), "--avg-request-len", "9216"])
    assert "cannot read boot log" in err


def test_subprocess_entry_point(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "flashfleet", *BASE, "--avg-request-len", "9216", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["mamba_full_memory_ratio"] == 2.22
    empty = tmp_path / "empty.log"
    empty.write_text("")
    bad = subprocess.run(
        [sys.executable, "-m", "flashfleet", "size", "--boot-log", str(empty), "--avg-request-len", "9216"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "flashfleet size: boot log has no 'Mamba Cache is allocated.' or 'KV Cache is allocated.' line: "
        "pass the whole log of one server start"
    ]


# the log's 8 ranks are one H200 node's (a 4-GPU GB300 stack refuses it)
@pytest.mark.parametrize(("stack", "ratio"), [("h200-lowlat", 4.88), ("h200-throughput", 2.22)])
def test_the_stacks_strategy_decides_the_draft_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stack: str, ratio: float
) -> None:
    """A low-latency stack is sized with its MTP draft (the README's 4.88), a high-throughput one
    without (2.22), with no --strategy given; a flag that contradicts the stack is refused."""
    repo = Path(__file__).parents[2]
    (tmp_path / f"Pulumi.{stack}.yaml").write_text((repo / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    argv = [*BASE, "--avg-request-len", "9216", "--stack", stack, "--stacks-dir", str(tmp_path)]
    out = _json(capsys, argv)
    assert out["mamba_full_memory_ratio"] == ratio
    other = "high-throughput" if ratio == 4.88 else "low-latency"
    err = _refused(capsys, [*argv, "--strategy", other, "--write"])
    assert f"--strategy: {other} contradicts the stack's strategy" in err
    err = _refused(capsys, [*argv, "--draft-tokens", "3", "--write"])
    assert "--draft-tokens: 3 contradicts the stack's" in err
    assert "mamba_full_memory_ratio" not in (tmp_path / f"Pulumi.{stack}.yaml").read_text()  # nothing written
