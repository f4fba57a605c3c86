"""`flashfleet diff`: the command-line diff between the base recipe and the overrides.

Exit status as diff(1) gives it: 0 the commands are the same (nothing overridden, or overrides
that change no flag), 1 they differ, 2 bad input.
"""

from __future__ import annotations

import argparse

from flashfleet.cli.common import (
    add_format,
    add_recipe_args,
    print_json,
    recipe_overrides,
)
from flashfleet.recipes.diff import diff


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff",
        help="what overrides change in the command lines (the Playground); exit 0 same, 1 different",
    )
    add_recipe_args(p)
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = diff(args.hardware, args.strategy, args.topology, recipe_overrides(args))
    status = 1 if result.processes else 0
    if args.format == "json":
        print_json(result.to_dict())
        return status
    print(f"badge: {result.base.badge} -> {result.changed.badge}")
    if not result.processes:
        print("(no command-line change)")
    for p in result.processes:
        print(f"{p.name}:")
        for unit in p.removed:
            print(f"  - {unit}")
        for unit in p.added:
            print(f"  + {unit}")
    return status
