"""`flashfleet diff`: the command-line diff between the base recipe and the overrides."""

from __future__ import annotations

import argparse

from flashfleet.cli.common import (
    UsageError,
    add_format,
    add_recipe_args,
    print_json,
    recipe_overrides,
)
from flashfleet.recipes.diff import diff


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="what overrides change in the command lines (the Playground)")
    add_recipe_args(p)
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides = recipe_overrides(args)
    if not overrides:
        raise UsageError("nothing to compare: give at least one --set NAME=VALUE or --extra-args")
    result = diff(args.hardware, args.strategy, args.topology, overrides)
    if args.format == "json":
        print_json(result.to_dict())
        return 0
    print(f"badge: {result.base.badge} -> {result.changed.badge}")
    if not result.processes:
        print("(no command-line change)")
    for p in result.processes:
        print(f"{p.name}:")
        for unit in p.removed:
            print(f"  - {unit}")
        for unit in p.added:
            print(f"  + {unit}")
    return 0
