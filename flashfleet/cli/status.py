"""`flashfleet status STACK`: the stack's outputs (secrets masked), its last Pulumi operation
and the latest bring-up runs recorded on this machine. Exit 2, one line, without the Pulumi CLI
or when the stack cannot be selected or read."""

from __future__ import annotations

import argparse
from pathlib import Path

from flashfleet.cli.common import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="outputs, last operation and latest bring-up runs of a stack")
    p.add_argument("stack", help="stack name")
    p.add_argument("--runs-dir", type=Path, default=None, metavar="DIR", help="where run directories are")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import stackops
    from flashfleet.bringup.handoff import default_runs_root

    try:
        outs = stackops.outputs(args.stack)
        last = stackops.last_update(args.stack)
    except (stackops.PulumiUnavailable, stackops.StackError) as err:
        raise UsageError(str(err)) from None
    print(f"stack: {args.stack}")
    print(f"last operation: {last or 'none'}")
    for key, out in sorted(outs.items()):
        if key != "inventory":
            print(f"{key}: {out.shown()}")
    runs = sorted((args.runs_dir or default_runs_root()).joinpath(args.stack).glob("*/summary.txt"))
    for summary in runs[-5:]:
        first = summary.read_text(encoding="utf-8").splitlines()[0]
        print(f"run {summary.parent.name}: {first.split(';')[0]}")
    return 0
