"""One rule for naming a stack, on every command that takes one: its name, the path of its file
(`Pulumi.<name>.yaml`, in any folder) or `--stack NAME`, resolved by the one resolver
(`flashfleet.cli.common.stack_arg`). `up`, `down` and `configure` (without --inventory) drive
Pulumi, which only knows the project's own stack files: a file elsewhere is refused there in one
line (exit 2, rule pulumi-stack-file). The finding: `up`, `down`, `status`, `bench`, `capacity`,
`logs` and `configure` took a path as a name (`Pulumi.-tmp-...yaml.yaml: no such stack`)."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import COMMANDS, _parser, common, main
from flashfleet.cli.shared import stackops
from flashfleet.stack import DEFAULT_STACKS_DIR

NAME = "h200-lowlat"
CATALOG_FILE = str(DEFAULT_STACKS_DIR / f"Pulumi.{NAME}.yaml")
OWN = "h200-pair"  # a stack of one's own: a copy of NAME's file outside stacks/
BOOT_LOG = str(Path(__file__).parents[1] / "sizing" / "logs" / "mla_fp8_tp8_worked_example.log")
STACK_DESTS = {"stack", "stacks", "named_stacks"}

# prog -> (the words before the stack, the words after it, whether it takes a positional STACK,
# whether it drives Pulumi). Every parser with a stack argument must be here (see the walk).
CASES: dict[str, tuple[list[str], list[str], bool, bool]] = {
    "flashfleet plan": (["plan"], [], True, False),
    "flashfleet validate": (["validate"], [], True, False),
    "flashfleet inventory": (["inventory"], [], True, False),
    "flashfleet manifest": (["manifest"], [], True, False),
    "flashfleet lock": (["lock"], [], True, False),
    "flashfleet check": (["check"], [], True, False),
    "flashfleet size": (["size", "--boot-log", BOOT_LOG, "--avg-request-len", "9216"], [], False, False),
    "flashfleet matrix": (["matrix"], [], False, False),
    "flashfleet sweep": (["sweep"], [], False, False),
    "flashfleet capacity offers": (["capacity", "offers"], [], True, False),
    "flashfleet capacity buy": (["capacity", "buy"], ["--offering", "cbo-1"], True, False),
    "flashfleet bench": (["bench"], [], True, False),
    "flashfleet status": (["status"], [], True, False),
    "flashfleet logs": (["logs"], [], True, False),
    "flashfleet up": (["up"], [], True, True),
    "flashfleet down": (["down"], [], True, True),
    "flashfleet configure": (["configure"], [], True, True),
}
# With --inventory, down and configure work on existing hosts without Pulumi: any path will do.
WITH_INVENTORY = {
    "down --inventory": (["down"], ["--inventory", "inv.yaml"], True, False),
    "configure --inventory": (["configure"], ["--inventory", "inv.yaml"], True, False),
}


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _walk(child)


def _stack_taking() -> set[str]:
    return {
        p.prog
        for command in COMMANDS
        for p in _walk(_parser(command))
        if any(a.dest in STACK_DESTS for a in p._actions)
    }


def test_the_walk_finds_every_command_that_takes_a_stack() -> None:
    assert _stack_taking() == set(CASES)


class _Resolved(BaseException):  # BaseException: no command's `except Exception` swallows it
    pass


@pytest.fixture
def own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "own").mkdir()
    shutil.copy(CATALOG_FILE, tmp_path / "own" / f"Pulumi.{OWN}.yaml")
    monkeypatch.chdir(tmp_path)  # no ./stacks here: a name is the catalog's
    monkeypatch.delenv(stackops.PROJECT_ENV, raising=False)  # the Pulumi project is this checkout
    return str(tmp_path / "own" / f"Pulumi.{OWN}.yaml")


def _resolve(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[str, Path]:
    """What the command resolved its stack to, with the real resolver; stops the command there."""
    real = common.stack_arg

    def spy(arg: str, stacks_dir: Path | None, **kw: Any) -> tuple[str, Path]:
        name, folder = real(arg, stacks_dir, **kw)
        raise _Resolved(name, folder)

    monkeypatch.setattr(common, "stack_arg", spy)
    with pytest.raises(_Resolved) as caught:
        main(argv)
    name, folder = caught.value.args
    return name, Path(folder).resolve()


def _forms(case: tuple[list[str], list[str], bool, bool], stack: str) -> list[list[str]]:
    before, after, positional, _ = case
    forms = [["--stack", stack]]
    if positional:
        forms.append([stack])
    return [[*before, *form, *after] for form in forms]


@pytest.mark.parametrize("prog", sorted({**CASES, **WITH_INVENTORY}))
def test_a_name_its_file_and_stack_option_resolve_alike(
    prog: str, own_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = {**CASES, **WITH_INVENTORY}[prog]
    seen = {_resolve(monkeypatch, argv) for stack in (NAME, CATALOG_FILE) for argv in _forms(case, stack)}
    assert seen == {(NAME, DEFAULT_STACKS_DIR.resolve())}
    if case[3]:  # drives Pulumi: a stack file elsewhere is refused in one line
        for argv in _forms(case, own_file):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1, err
            assert err[0].startswith(f"flashfleet {case[0][0]}: {own_file}: `{case[0][0]}` drives the Pulumi")
            assert err[0].endswith("[rule: pulumi-stack-file]")
            assert str(stackops.project_dir() / "stacks") in err[0]
    else:  # a stack of one's own, wherever its file is
        for argv in _forms(case, own_file):
            assert _resolve(monkeypatch, argv) == (OWN, Path(own_file).parent.resolve())


@pytest.fixture
def no_pulumi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stackops, "cli_available", lambda: False)


# The finding's commands, run to where each stops on this machine (no Pulumi CLI, no runs):
# every form names the same stack, and a path is never taken for a name.
ENDS = {
    "status": (["--runs-dir", "runs"], 0, "stack: {name}"),
    "logs": (["--runs-dir", "runs"], 2, "no `flashfleet configure {name}` run recorded"),
    "bench": ([], 2, "no --endpoint given and the Pulumi CLI is not installed"),
    "capacity offers": ([], 2, "stack {name}: flashfleet:stack.nodes.source.capacity"),
    "up": ([], 2, "the Pulumi CLI is not installed"),
    "down": ([], 2, "the Pulumi CLI is not installed"),
    "configure": ([], 2, "the Pulumi CLI is not installed"),
}


@pytest.mark.parametrize("command", sorted(ENDS))
def test_the_commands_that_mangled_a_path_now_read_it(
    command: str, own_file: str, no_pulumi: None, capsys: pytest.CaptureFixture[str]
) -> None:
    tail, code, expected = ENDS[command]
    words = command.split()
    outputs = []
    for form in ([NAME], [CATALOG_FILE], ["--stack", NAME]):
        assert main([*words, *form, *tail]) == code
        out = capsys.readouterr()
        text = out.out + out.err
        assert expected.format(name=NAME) in text
        assert "Pulumi.-" not in text
        assert ".yaml.yaml" not in text
        outputs.append(out)
    assert outputs[0] == outputs[1] == outputs[2]
    if command not in ("up", "down", "configure"):  # these refuse a file elsewhere (above)
        assert main([*words, own_file, *tail]) == code
        out = capsys.readouterr()
        assert expected.format(name=OWN) in out.out + out.err
