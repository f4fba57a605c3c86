"""No option is ever abbreviated, and a STACK can be given as `--stack NAME`.

argparse accepts any unique prefix of an option by default: `--y` passed for `--yes` (spending
and deleting without the flag typed) and `plan --stack NAME` was read as `--stacks-dir NAME`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from flashfleet.cli import COMMANDS, _parser, main


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _walk(child)


def _all_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for command in COMMANDS:  # each command's module registers its real parser only when named
        for parser in _walk(_parser(command)):
            yield command, parser


def test_every_parser_and_subparser_refuses_abbreviations() -> None:
    seen = list(_all_parsers())
    progs = {p.prog for _, p in seen}
    # The walk reaches nested subcommands too, so a new one cannot be missed.
    assert {"flashfleet capacity buy", "flashfleet capacity offers", "flashfleet sweep"} <= progs
    assert [p.prog for _, p in seen if p.allow_abbrev is not False] == []


# Commands that spend or delete, each with a STACK where it takes one.
SPENDING = {
    "capacity buy": ["capacity", "buy", "gb300-lowlat", "--offering", "cbo-00000000000000001"],
    "sweep": ["sweep"],
    "down": ["down", "h200-lowlat"],
    "up": ["up", "h200-lowlat"],
}


@pytest.mark.parametrize("prefix", ["--y", "--ye"])
@pytest.mark.parametrize("name", sorted(SPENDING))
def test_a_prefix_of_yes_is_refused(name: str, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = SPENDING[name]
    # The parser does take the whole word (so a refusal below is about the prefix only).
    assert _parser(argv[0]).parse_args([*argv, "--yes"]).yes is True
    assert main([*argv, prefix]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        f"flashfleet {argv[0]}: unrecognized arguments: {prefix} (see flashfleet {argv[0]} --help)"
    ]


@pytest.mark.parametrize("extra", [["--destroy", "--y"], ["--destroy", "--ye"], ["--dest"], ["--destr"]])
def test_bench_destroy_takes_no_prefixes(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "h200-lowlat", "--endpoint", "http://192.0.2.1:30000"]
    assert _parser("bench").parse_args([*argv, "--destroy"]).destroy is True
    assert main([*argv, *extra]) == 2
    _, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        f"flashfleet bench: unrecognized arguments: {extra[-1]} (see flashfleet bench --help)"
    ]


def test_plan_takes_the_stack_as_an_option_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "gb300-lowlat", "--format", "json"]) == 0
    positional = capsys.readouterr()
    assert main(["plan", "--stack", "gb300-lowlat", "--format", "json"]) == 0
    option = capsys.readouterr()
    assert option.out == positional.out
    assert '"stack": "gb300-lowlat"' in option.out
    assert option.err == positional.err


def test_stack_and_stack_option_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "gb300-lowlat", "--stack", "h200-lowlat"]) == 2
    _, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "flashfleet plan: argument --stack: not allowed with argument STACK (see flashfleet plan --help)"
    ]
    assert main(["plan"]) == 2
    _, err = capsys.readouterr()
    assert "one of the arguments STACK --stack is required" in err


def test_every_positional_stack_also_takes_the_option() -> None:
    takes: list[str] = []
    for _, parser in _all_parsers():
        dests = {a.dest: a for a in parser._actions}
        if "stack" not in dests:
            continue
        by_option = [a for a in parser._actions if "--stack" in a.option_strings]
        positional = [a for a in parser._actions if a.dest == "stack" and not a.option_strings]
        assert [a.dest for a in by_option] == ["stack"], parser.prog
        if positional:
            takes.append(parser.prog)
    assert {"flashfleet plan", "flashfleet up", "flashfleet down", "flashfleet capacity buy"} <= set(takes)


def test_every_parser_with_a_stack_positional_takes_the_option_too() -> None:
    # by what the user sees (STACK in the usage), whatever the positional's dest: `validate`'s is `stacks`
    missing = []
    for _, parser in _all_parsers():
        has_positional = any(a.metavar == "STACK" and not a.option_strings for a in parser._actions)
        if has_positional and not any("--stack" in a.option_strings for a in parser._actions):
            missing.append(parser.prog)
    assert missing == []


def test_validate_takes_the_stack_as_an_option_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "h200-lowlat", "mi355x-lowlat", "--format", "json"]) == 0
    positional = capsys.readouterr().out
    assert main(["validate", "--stack", "h200-lowlat", "--stack", "mi355x-lowlat", "--format", "json"]) == 0
    option = capsys.readouterr().out
    assert option == positional
    assert [line for line in option.splitlines() if '"stack":' in line] == [
        '    "stack": "h200-lowlat",',
        '    "stack": "mi355x-lowlat",',
    ]
