"""`flashfleet validate [STACK...]`: check stack files (all of stacks/ by default)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate", help="check stack files against the spec, the recipe rules and the catalogs"
    )
    p.add_argument("stacks", nargs="*", metavar="STACK", help="stack names (default: every file in stacks/)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.cli.common import UsageError
    from flashfleet.planning import load_stack
    from flashfleet.planning.resolve import capacity_needed
    from flashfleet.stack import DEFAULT_STACKS_DIR, StackError, list_stacks

    stacks_dir = args.stacks_dir or DEFAULT_STACKS_DIR
    names = args.stacks or list_stacks(stacks_dir)
    if not names:
        raise UsageError("no stack files in stacks/")
    failed = 0
    for name in names:
        try:
            b = load_stack(name, stacks_dir)
        except StackError as err:
            failed += 1
            print(f"FAIL {err}", file=sys.stderr)
            continue
        # Valid, but `pulumi up` refuses it until its capacity exists: say so on the same line.
        todo = f"; {capacity_needed(name, b.spec)}" if b.needs_capacity_purchase else ""
        print(
            f"ok   {name}: {b.spec.hardware} / {b.spec.strategy} / {b.spec.topology}, {b.recipe.badge}{todo}"
        )
    return 2 if failed else 0
