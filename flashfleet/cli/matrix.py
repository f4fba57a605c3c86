"""`flashfleet matrix`: every cell with its badge, or disabled and why."""

from __future__ import annotations

import argparse

from flashfleet.cli.common import add_format, print_json
from flashfleet.recipes.matrix import matrix
from flashfleet.table import aligned


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("matrix", help="every hardware x strategy x topology cell with its badge")
    add_format(p, "text", "json")
    p.add_argument(
        "--choices",
        action="store_true",
        help="also list the option choices each cell refuses, with the reason",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cells = matrix(with_choices=args.choices or args.format == "json")
    if args.format == "json":
        print_json([c.to_dict() for c in cells])
        return 0
    rows = []
    for c in cells:
        rows.append([f"{c.hardware} {c.strategy} {c.topology}", c.badge or f"disabled: {c.disabled_reason}"])
        if args.choices:  # each refused choice on a line of its own, under the cell's status
            for option, choices in c.disabled_choices.items():
                rows += [["", f"  {option}={choice}: {reason}"] for choice, reason in choices.items()]
    print("\n".join(aligned(rows)))
    return 0
