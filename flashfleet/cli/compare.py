"""`flashfleet compare RUN RUN...`: several benchmark runs lined up in one table and one plot.

Runs whose prefix cache was handled differently (cold seeds per level, a deliberate flush, or
not recorded) are refused outright (exit 2). Runs measured differently (profile, lengths, range
ratio, ignore-eos, request rate, load generator and its version) are refused unless
--allow-method-mismatch, and runs that served different bytes of the same checkpoint (another
commit) or the same image tag (another digest) unless --allow-build-mismatch; then the
differences are printed above the table. Exit status: 0 every run valid and comparable, 2 bad
input, 3 refused (methods or builds differ) or any run is not valid (marked in the table).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from flashfleet.cli.common import UsageError, add_format, print_json, writable_dir

EXIT_REFUSED = 3


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="line up several benchmark runs (results/STACK/TIMESTAMP)")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories")
    p.add_argument("--out", type=Path, default=None, help="also write compare.md and the plot here")
    p.add_argument(
        "--allow-method-mismatch",
        action="store_true",
        help="compare runs measured differently (the differences are listed)",
    )
    p.add_argument(
        "--allow-build-mismatch",
        action="store_true",
        help="compare runs that served another commit of a checkpoint or digest of an image tag (listed)",
    )
    add_format(p, "markdown", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from flashfleet.bench.fingerprint import build_differences
    from flashfleet.bench.method import cache_mismatch, differences
    from flashfleet.bench.store import load_run
    from flashfleet.stack.errors import plain_message

    if len(args.runs) < 2:
        raise UsageError("give at least two runs to compare")
    if args.out is not None:
        writable_dir(args.out, "--out")
    try:
        runs = [load_run(path) for path in args.runs]
    except (OSError, ValueError) as err:  # ValueError: a summary.json that is not JSON
        raise UsageError(str(err).splitlines()[0]) from None
    for r in runs:
        _check_shape(r.path, r.summary, r.fingerprint)
        try:
            r.levels  # noqa: B018 (parses every level row the table will read)
        except ValidationError as err:  # the first problem, in one line
            first = err.errors()[0]
            where = ".".join(map(str, first["loc"]))
            why = "missing" if first["type"] == "missing" else plain_message(first)
            raise UsageError(f"{r.path}/summary.json: a level row is incomplete ({where}: {why})") from None
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"{r.path}/summary.json: a level row is incomplete ({err!r})") from None
    cache = cache_mismatch({str(r.path): r.method for r in runs})
    if cache:  # a warm cache against a cold one is no comparison, whatever is allowed
        raise UsageError(f"refused, {cache}")
    diffs = differences({str(r.path): r.method for r in runs})
    builds = build_differences({str(r.path): r.fingerprint for r in runs})
    for found, allowed, why, flag in (
        (diffs, args.allow_method_mismatch, "were measured differently", "--allow-method-mismatch"),
        (builds, args.allow_build_mismatch, "served different bytes", "--allow-build-mismatch"),
    ):
        if found and not allowed:
            print(f"flashfleet compare: refused, the runs {why}:", file=sys.stderr)
            for line in found:
                print(f"  {line}", file=sys.stderr)
            print(f"({flag} compares them anyway)", file=sys.stderr)
            return EXIT_REFUSED
    if args.format == "json":
        print_json(
            {
                "method_differences": diffs,
                "build_differences": builds,
                "runs": [
                    {
                        "run": str(r.path),
                        "label": r.label,
                        "valid": r.valid,
                        "fingerprint": r.fingerprint,
                        "summary": r.summary,
                    }
                    for r in runs
                ],
            }
        )
    else:
        from flashfleet.bench.report import compare_markdown

        print(compare_markdown(runs, diffs, builds), end="")
    if args.out is not None:
        from flashfleet.bench.report import write_compare

        for path in write_compare(runs, args.out, diffs, builds):
            print(f"wrote {path}", file=sys.stderr if args.format == "json" else sys.stdout)
    failed = [r.path for r in runs if not r.valid]
    for bad in failed:
        print(f"flashfleet compare: {bad} is not a valid run (see its report.md)", file=sys.stderr)
    return EXIT_REFUSED if failed else 0


def _check_shape(path: Path, summary: Any, fingerprint: Any) -> None:
    """A summary.json written by `flashfleet bench` (what the table reads), or one line saying what
    is missing."""
    where = f"{path}/summary.json"
    if not isinstance(summary, dict):
        raise UsageError(f"{where}: expected a JSON object, found {type(summary).__name__}")
    for key, kind in (("stack", str), ("profile", dict), ("levels", list)):
        if not isinstance(summary.get(key), kind):
            raise UsageError(f"{where}: `{key}` is missing or not a {kind.__name__} (not a bench summary)")
    if not isinstance(summary["profile"].get("name"), str):
        raise UsageError(f"{where}: `profile.name` is missing")
    for i, row in enumerate(summary["levels"]):
        if not isinstance(row, dict) or not isinstance(row.get("concurrency"), int):
            raise UsageError(f"{where}: levels[{i}] has no integer `concurrency`")
    if not isinstance(fingerprint, dict):
        raise UsageError(f"{path}/fingerprint.json: expected a JSON object")
