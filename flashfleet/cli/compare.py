"""`flashfleet compare RUN RUN...`: several benchmark runs lined up in one table and one plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from flashfleet.cli.common import UsageError, add_format, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="line up several benchmark runs (results/STACK/TIMESTAMP)")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories")
    p.add_argument("--out", type=Path, default=None, help="also write compare.md and the plot here")
    add_format(p, "markdown", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.bench.store import load_run

    if len(args.runs) < 2:
        raise UsageError("give at least two runs to compare")
    try:
        runs = [load_run(path) for path in args.runs]
    except (OSError, ValueError) as err:  # ValueError: a summary.json that is not JSON
        raise UsageError(str(err)) from None
    if args.format == "json":
        print_json(
            [
                {"run": str(r.path), "label": r.label, "fingerprint": r.fingerprint, "summary": r.summary}
                for r in runs
            ]
        )
    else:
        from flashfleet.bench.report import compare_markdown

        print(compare_markdown(runs), end="")
    if args.out is not None:
        from flashfleet.bench.report import write_compare

        for path in write_compare(runs, args.out):
            print(f"wrote {path}")
    return 0
