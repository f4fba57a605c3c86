"""`flashfleet --help` lists the commands by task, `check` first; a mistyped command or choice
value is refused in one line (exit 2) that names the closest known one."""

from __future__ import annotations

import re

import pytest

from flashfleet.cli import COMMANDS, GROUPS, main


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_every_command_is_in_exactly_one_group() -> None:
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS)  # none missing, none twice


def test_help_lists_the_commands_under_their_task_with_check_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys)
    # each command's own line: two spaces, its name, its help's first words
    listed = re.findall(r"^  ([a-z]+) +\S", text, flags=re.MULTILINE)
    assert listed[0] == "check", listed
    assert sorted(listed) == sorted(COMMANDS), listed
    titles = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert titles[: len(GROUPS)] == [title for title, _ in GROUPS], titles
    # a command sits under its own group's title, after it and before the next one
    assert text.index("run a stack:") < text.index("  logs ") < text.index("benchmark:")
    assert text.index("a stack, offline:") < text.index("  plan ") < text.index("run a stack:")


@pytest.mark.parametrize(
    ("argv", "command", "hint"),
    [
        (["pln"], "pln", "invalid choice: 'pln'; did you mean plan?"),
        (["stauts", "h200-pair"], "stauts", "did you mean status?"),
        (
            ["matrix", "--format", "jsn"],
            "matrix",
            "invalid choice: 'jsn' (choose from text, json); did you mean json?",
        ),
        (
            ["render", "--hardware", "h200", "--strategy", "lowlatency"],
            "render",
            "unknown strategy 'lowlatency' (choose from: low-latency, high-throughput); did you mean low-latency?",
        ),
        (["render", "--hardware", "h20", "--strategy", "low-latency"], "render", "did you mean h200?"),
    ],
    ids=["command", "command-transposed", "choice", "strategy", "hardware"],
)
def test_a_typo_is_one_line_exit_2_naming_the_closest(
    capsys: pytest.CaptureFixture[str], argv: list[str], command: str, hint: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flashfleet {command}: "), err
    assert hint in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_nothing_close_suggests_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err, err
    assert "did you mean" not in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("argv", "pointer"),
    [
        (["plan", "h200-lowlat", "--nope"], "(see flashfleet plan --help)"),  # found by the top parser
        (["plan", "--format", "xml", "h200-lowlat"], "(see flashfleet plan --help)"),  # found by plan's own
        (["validate", "--nope"], "(see flashfleet validate --help)"),
    ],
)
def test_every_refused_argument_points_at_the_commands_own_help(
    capsys: pytest.CaptureFixture[str], argv: list[str], pointer: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(pointer), err
    assert len(err.strip().splitlines()) == 1, err
