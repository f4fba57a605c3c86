"""The `flashfleet` command line.

Each subcommand lives in its own module of this package and exposes ``register(subparsers)``
(which adds its parser and sets ``func``). Modules are imported only for the command being
run, so `render` and `matrix` never pay for pulumi, boto3 or ansible imports.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from flashfleet import __version__
from flashfleet.cli.common import UsageError
from flashfleet.recipes.errors import RecipeError
from flashfleet.user_files import UserFileError

# command name -> module under flashfleet.cli (one word of help for the top-level listing)
COMMANDS: dict[str, tuple[str, str]] = {
    "matrix": (
        "matrix",
        "every hardware x strategy x topology cell with its badge or why it is disabled",
    ),
    "render": ("render", "render the sglang commands of one recipe"),
    "diff": ("diff", "show what overrides change in the command lines (the Playground)"),
    "options": ("options", "list the recipe options, their values and defaults"),
    "size": ("size", "size the KV and KDA state pools from a boot log"),
    "plan": ("plan", "the whole bring-up of a stack, offline: nodes, docker commands, Mooncake, cost"),
    "manifest": (
        "manifest",
        "the Kubernetes objects of a Kubernetes stack, as YAML (as helm template prints them)",
    ),
    "lock": (
        "lock",
        "pin what the stack fetches (weights, image, pip and apt packages, FFmpeg, AMIs): <stack>.lock.yaml",
    ),
    "validate": ("validate", "check every stack file (or those named); a refusal names the YAML path"),
    "inventory": ("inventory", "the Ansible inventory of a stack's existing hosts (YAML or JSON)"),
    "bench": ("bench", "benchmark a stack's endpoint with a workload profile; --destroy tears it down"),
    "compare": ("compare", "line up several benchmark runs in one table and plot"),
    "sweep": ("sweep", "list (--yes: delete) expired or orphaned flashfleet-tagged AWS resources"),
    "capacity": ("capacity", "Capacity Blocks for a stack: list offerings that fit, buy one"),
    "offers": ("offers", "instance types, regions and prices of the catalog, each price's source (offline)"),
    "up": ("up", "bring a stack up through Pulumi: nodes, preparation, serving, smoke checks"),
    "down": ("down", "tear a stack down (pulumi destroy, or teardown.yml on existing hosts)"),
    "ls": ("ls", "every stack: state, endpoint, expiry and cost so far"),
    "status": ("status", "a stack's outputs, last operation and latest bring-up runs"),
    "configure": ("configure", "run the playbooks against a stack's hosts (--inventory: without Pulumi)"),
    "logs": ("logs", "the last lines of each serving container's output on a stack's nodes"),
    "timeline": ("timeline", "chart where a bring-up run's time went, per host and phase"),
    "check": ("check", "is this machine ready: Pulumi, backend, passphrase, AWS, hosts (ok/missing, fix)"),
    "new": ("new", "write a stack file of your own to start from (commented; it validates)"),
}


# `flashfleet --help` lists the commands by task, in the order a new user reaches for them.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("start here", ("check", "new", "offers")),
    ("recipes, offline", ("matrix", "options", "render", "diff", "size")),
    ("a stack, offline", ("plan", "validate", "inventory", "manifest", "lock")),
    ("run a stack", ("up", "status", "logs", "configure", "down", "ls")),
    ("benchmark", ("bench", "compare", "timeline")),
    ("AWS capacity and clean-up", ("capacity", "sweep")),
)


def _grouped_commands() -> str:
    import textwrap

    width = max(map(len, COMMANDS)) + 4
    out = []
    for title, names in GROUPS:
        out.append(f"{title}:")
        for name in names:
            lines = textwrap.wrap(COMMANDS[name][1], 79 - width)
            out.append(f"  {name:<{width - 2}}{lines[0]}")
            out += [" " * width + line for line in lines[1:]]
        out.append("")
    return "\n".join(out).rstrip()


class _Parser(argparse.ArgumentParser):
    """Argument errors become one line on stderr and exit code 2, like every other bad input.

    Abbreviations are off for this parser and every subparser made from it (they are made with
    its class): `--y` must not pass for `--yes`, nor `--stack` for `--stacks-dir`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An unknown command or choice says the closest known one (`pln`: did you mean plan?)."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            from flashfleet.suggest import closest

            choices = [str(c) for c in action.choices or ()]
            near = closest(str(value), choices)
            if near is None:
                raise
            # the closest name, not all 22 commands; a choice keeps its short list
            known = (
                ""
                if isinstance(action, argparse._SubParsersAction)
                else f" (choose from {', '.join(choices)})"
            )
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{known}; did you mean {near}?"
            ) from None


def _parser(command: str | None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="flashfleet",
        description="GLM-5.3-Flash on SGLang: recipes, bring-up, benchmark and teardown.\n\n"
        + _grouped_commands(),
        epilog="`flashfleet COMMAND --help` gives a command's own arguments.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"flashfleet {__version__}")
    # The description lists the commands by task; argparse's own flat listing is suppressed.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS)
    parser.usage = "%(prog)s [-h] [--version] COMMAND ..."
    for name, (module, _) in COMMANDS.items():
        if name == command:
            mod = importlib.import_module(f"flashfleet.cli.{module}")
            mod.register(sub)
        else:
            sub.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    try:
        return _run(command, args_list)
    except KeyboardInterrupt:  # Ctrl-C: the shell's own status for SIGINT, and one line
        print(f"flashfleet {command or ''}: interrupted".replace(" :", ":"), file=sys.stderr)
        return 130


def _run(command: str | None, args_list: list[str]) -> int:
    parser = _parser(command if command in COMMANDS else None)
    try:
        args, unknown = parser.parse_known_args(args_list)
        if unknown:  # the top parser finds them: point at the command's own help, as its errors do
            where = f"flashfleet {command} --help" if command in COMMANDS else "flashfleet --help"
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)} (see {where})")
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except (UsageError, RecipeError) as err:
        rule = f" [rule: {err.rule}]" if isinstance(err, RecipeError) else ""
        print(f"flashfleet {command or ''}: {err}{rule}".replace(" :", ":"), file=sys.stderr)
        return 2
    except UserFileError as err:  # a full disk, a read-only folder: the file is as it was
        print(f"flashfleet {command or ''}: {err}".replace(" :", ":"), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as err:
        if err.filename is None:  # not about a file the user can fix: a bug, with its traceback
            raise
        # a run folder on a full or read-only disk, a file that went away: which, and why
        print(
            f"flashfleet {command or ''}: {err.filename}: {err.strerror or err}".replace(" :", ":"),
            file=sys.stderr,
        )
        return 1
