"""`lock --help` names every part of the lock, and `size --stack` refuses a boot log whose ranks
its stack's nodes could not hold. The findings: `lock --help` said less than the lock holds, and
`size --stack gb300-lowlat` took an 8-rank H200 boot log for a 4-GPU GB300 stack without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from flashfleet.cli import main
from flashfleet.stack.lock import StackLock

LOGS = Path(__file__).parents[1] / "sizing" / "logs"
EIGHT_RANKS = str(LOGS / "mla_fp8_tp8_worked_example.log")
FOUR_RANKS = str(LOGS / "mla_bf16_speculative_dp4.log")

# each part of the lock, and the words `lock --help` names it with
PARTS = {
    "weights": ["weights", "commit"],
    "images": ["image", "digest"],
    "packages": ["pip packages", "sha256"],
    "apt": ["apt packages", "NVIDIA driver", "ROCm"],
    "image_apt": ["FFmpeg", "snapshot"],
    "amis": ["AMIs"],
}


def test_lock_help_names_every_part_of_the_lock(capsys: pytest.CaptureFixture[str]) -> None:
    # a new part of the lock must be named here, and so in the help
    assert set(StackLock.model_fields) - {"stack", "locked_on"} == set(PARTS)
    with pytest.raises(SystemExit):
        main(["lock", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    missing = [word for words in PARTS.values() for word in words if word not in text]
    assert missing == []


def test_size_refuses_a_boot_log_with_more_ranks_than_the_stack_s_gpus_per_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["size", "--boot-log", EIGHT_RANKS, "--avg-request-len", "9216", "--stack", "gb300-lowlat"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        f"flashfleet size: --boot-log {EIGHT_RANKS}: 8 ranks, but stack gb300-lowlat has 4 GPUs per node "
        "(gb300): the log is from other hardware [rule: boot-log-ranks]"
    ]


@pytest.mark.parametrize(("log", "stack"), [(EIGHT_RANKS, "h200-lowlat"), (FOUR_RANKS, "gb300-lowlat")])
def test_size_takes_a_boot_log_the_stack_s_nodes_can_hold(
    log: str, stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["size", "--boot-log", log, "--avg-request-len", "9216", "--stack", stack]) == 0
    assert "ranks agree" in capsys.readouterr().out
