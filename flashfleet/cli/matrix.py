"""`flashfleet matrix`: every cell with its badge, or disabled and why; with `--stack`, a stack's
own badge (its benchmark evidence, flashfleet.bench.evidence) beside the cookbook's on its cell."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from flashfleet.cli.common import UsageError, add_evidence_results, add_format, print_json
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
    p.add_argument(
        "--stack", dest="stacks", action="append", default=[], metavar="STACK",
        help="show this stack's own badge, from its benchmark evidence, on its cell (repeatable)",
    )  # fmt: skip
    add_evidence_results(p)
    p.set_defaults(func=run)


def _own_badges(stacks: list[str], results: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """(hardware, strategy, topology) -> stack -> its own badge line."""
    if not stacks:  # the plain matrix reads no stack (and imports none of that)
        return {}
    from flashfleet.bench.evidence import badge_line
    from flashfleet.cli.common import stack_arg
    from flashfleet.planning import load_stack
    from flashfleet.stack import StackError

    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for arg in stacks:
        try:
            plan = load_stack(*stack_arg(arg, None))
        except StackError as err:
            raise UsageError(str(err).splitlines()[0]) from None
        cell = (plan.spec.hardware, plan.spec.strategy, plan.spec.topology)
        out.setdefault(cell, {})[plan.stack] = badge_line(plan, results)
    return out


def run(args: argparse.Namespace) -> int:
    own = _own_badges(args.stacks, args.results)
    cells = matrix(with_choices=args.choices or args.format == "json")
    if args.format == "json":
        out = []
        for c in cells:
            row = asdict(c)
            if args.stacks:
                row["stacks"] = own.get((c.hardware, c.strategy, c.topology), {})
            out.append(row)
        print_json(out)
        return 0
    rows = []
    for c in cells:
        rows.append([f"{c.hardware} {c.strategy} {c.topology}", c.badge or f"disabled: {c.disabled_reason}"])
        # each stack's own badge under the cookbook's, on a line of its own
        rows += [
            ["", f"  {name}: {badge}"]
            for name, badge in own.get((c.hardware, c.strategy, c.topology), {}).items()
        ]
        if args.choices:  # each refused choice on a line of its own, under the cell's status
            for option, choices in c.disabled_choices.items():
                rows += [["", f"  {option}={choice}: {reason}"] for choice, reason in choices.items()]
    print("\n".join(aligned(rows)))
    return 0
