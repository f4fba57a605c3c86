"""Helpers shared by the subcommands: errors, output formats."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad input: printed as one line on stderr, exit code 2, never a traceback."""


def add_format(parser: argparse.ArgumentParser, *choices: str) -> None:
    parser.add_argument(
        "--format", choices=choices, default=choices[0], help="output format (default: %(default)s)"
    )


def add_evidence_results(parser: argparse.ArgumentParser) -> None:
    """--results: where a stack's benchmark evidence is read (flashfleet.bench.evidence)."""
    parser.add_argument(
        "--results", type=Path, default=Path("results"),
        help="benchmark results root, where the stack's evidence is read (default: %(default)s)",
    )  # fmt: skip


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def yaml_text(data: Any, *, documents: bool = False, literal_blocks: bool = False, **options: Any) -> str:
    """YAML as a person reads it: a value shared by two keys is written out twice, never as an
    anchor and alias (`&id001` / `*id001`); `documents`: `data` is a list of documents;
    `literal_blocks`: a text of several lines (a program in a ConfigMap) as a `|` block, line by
    line, not one escaped string (PyYAML falls back to quoting where a block cannot hold it)."""
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    if literal_blocks:

        def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
            style = "|" if "\n" in value else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        _NoAliases.add_representer(str, _text)

    options.setdefault("sort_keys", False)
    if documents:
        return str(yaml.dump_all(data, Dumper=_NoAliases, **options))
    return str(yaml.dump(data, Dumper=_NoAliases, **options))


def add_recipe_args(parser: argparse.ArgumentParser, *, overrides: bool = True) -> None:
    """--hardware/--strategy/--topology plus --set NAME=VALUE and --extra-args."""
    parser.add_argument("--hardware", required=True, help="gb300 | h200 | mi355x")
    parser.add_argument("--strategy", required=True, help="low-latency | high-throughput")
    parser.add_argument(
        "--topology",
        default="unified",
        help="unified | encoder-disagg | prefill-cp | pd (default: %(default)s)",
    )
    if overrides:
        parser.add_argument(
            "--set",
            dest="assignments",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="override an option (repeatable); see `flashfleet options`",
        )
        parser.add_argument(
            "--extra-args",
            default=None,
            metavar="'WORDS'",
            help="Playground escape hatch: extra sglang serve flags, checked against the rules",
        )


def recipe_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from flashfleet.recipes.options import parse_assignments, parse_overrides

    overrides = parse_assignments(args.assignments)
    if args.extra_args is not None:
        overrides.update(parse_overrides({"extra_args": args.extra_args}))
    return overrides


def add_stack(parser: argparse.ArgumentParser, help_text: str, *, required: bool = True) -> None:
    """The stack as a positional STACK or as `--stack NAME` (what users type), not both: either
    lands in ``args.stack``. The positional's SUPPRESS default keeps an absent STACK from
    overwriting the option's value."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("stack", nargs="?", default=argparse.SUPPRESS, metavar="STACK", help=help_text)
    group.add_argument("--stack", dest="stack", default=None, metavar="NAME", help="the same as STACK")


_STACK_FILE = re.compile(r"^Pulumi\.(?P<name>.+)\.yaml$")


def stack_arg(arg: str, stacks_dir: Path | None, *, elsewhere: str | None = None) -> tuple[str, Path]:
    """A stack named as `NAME` (in --stacks-dir, else the repository's stacks/) or as the path of
    its file (`Pulumi.NAME.yaml`, in any folder): the name and the folder holding it. With
    `stacks_dir`, a file in another folder is refused: `elsewhere` says why (default: --stacks-dir)."""
    from flashfleet.stack.files import DEFAULT_STACKS_DIR
    from flashfleet.stack.stack_names import stack_name_problem

    path = Path(arg)
    match = _STACK_FILE.fullmatch(path.name)
    named = match.group("name") if match else arg
    if not named.endswith((".yaml", ".yml")) and (problem := stack_name_problem(named)):
        raise UsageError(f"{problem} [rule: stack-name]")
    if match:
        if not path.is_file():
            raise UsageError(f"{arg}: no such file")
        if stacks_dir is not None and path.parent.resolve() != stacks_dir.resolve():
            raise UsageError(f"{arg}: {elsewhere or f'a stack file outside --stacks-dir {stacks_dir}'}")
        return match.group("name"), path.parent
    if arg.endswith((".yaml", ".yml")):
        raise UsageError(f"{arg}: a stack file is named Pulumi.<stack>.yaml")
    if stacks_dir is None:
        # A user's own project keeps its stacks in ./stacks (as Pulumi.yaml's stackConfigDir
        # says): a name found there wins over the catalog's.
        local = Path("stacks")
        if (local / f"Pulumi.{arg}.yaml").is_file():
            return arg, local
    return arg, stacks_dir or DEFAULT_STACKS_DIR


def pulumi_stack_arg(
    arg: str, command: str, *, inventory: Path | None = None, inventory_hint: bool = False
) -> str:
    """The stack of a command that drives Pulumi (up; down and configure without --inventory):
    a name, or the path of its file in the Pulumi project's stacks/ folder. Pulumi only knows the
    project's own stack files, so a file elsewhere is refused rather than a namesake driven. With
    an `inventory` (no Pulumi), any stack file's path is taken, as every other command takes it."""
    from flashfleet.cli.shared.stackops import PROJECT_ENV, project_dir

    if inventory is not None:
        return stack_arg(arg, None)[0]
    stacks = project_dir() / "stacks"
    ways = ["copy it there", f"set {PROJECT_ENV} to the project folder that holds it"]
    if inventory_hint:
        ways.append("give --inventory FILE (existing hosts, without Pulumi)")
    why = (
        f"`{command}` drives the Pulumi project whose stack files are in {stacks}, and this one is "
        f"elsewhere: {', or '.join(ways)} [rule: pulumi-stack-file]"
    )
    name, _ = stack_arg(arg, stacks, elsewhere=why)
    return name


def can_ask(*, yes: bool) -> None:
    """Refuse up front what `confirm` could not ask: no terminal and no --yes. Checked before
    any work, so that a script without --yes stops at once and changes nothing."""
    if not yes and not sys.stdin.isatty():
        raise UsageError("asks before acting and there is no terminal to ask on: pass --yes")


def confirm(question: str, *, yes: bool) -> None:
    """Ask before spending or deleting; `--yes` answers for scripts. Anything but y/yes stops
    (exit 2) with nothing changed."""
    if yes:
        return
    can_ask(yes=yes)
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in {"y", "yes"}:
        raise UsageError("not confirmed: nothing was changed")


def writable_dir(path: Path, flag: str) -> Path:
    """Make sure an output folder can be written, before any work whose results it keeps."""
    import os
    import tempfile

    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".flashfleet-probe-"):
            pass
    except OSError as err:
        raise UsageError(
            f"{flag} {path}: cannot write there ({err.strerror or type(err).__name__})"
        ) from None
    return Path(os.path.normpath(path))


def writable_file(path: Path, flag: str) -> Path:
    """An output file whose folder exists and can be written (checked before the work). The
    folder is not made: a mistyped path must not leave folders behind."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: no such folder {path.parent} (make it first)")
    writable_dir(path.parent, flag)
    return path
