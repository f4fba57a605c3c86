"""Helpers shared by the subcommands: errors, output formats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class UsageError(Exception):
    """Bad input: printed as one line on stderr, exit code 2, never a traceback."""


def add_format(parser: argparse.ArgumentParser, *choices: str) -> None:
    parser.add_argument(
        "--format", choices=choices, default=choices[0], help="output format (default: %(default)s)"
    )


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


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
