"""`flashfleet validate [STACK...]`: check stack files (all of stacks/ by default).

Runs what `pulumi preview` and `up` refuse before anything is created: the one admission the
program runs (`flashfleet.admission`: the spec, the recipe rules and catalogs, the role
arguments, the bring-up's own check). What needs a cloud call is named on the line, never claimed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from flashfleet.cli.common import add_format, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate", help="check stack files against the spec, the recipe rules and the catalogs"
    )
    p.add_argument(
        "stacks", nargs="*", metavar="STACK",
        help="stack names or stack file paths (default: every file in the stacks folder)",
    )  # fmt: skip
    # `--stack NAME` as every command that takes a stack takes it (repeatable here, like STACK)
    p.add_argument(
        "--stack", dest="named_stacks", action="append", default=[], metavar="NAME",
        help="the same as STACK (repeatable)",
    )  # fmt: skip
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.admission import admit, not_checked_offline
    from flashfleet.cli.common import UsageError, stack_arg
    from flashfleet.planning.resolve import capacity_needed
    from flashfleet.stack import DEFAULT_STACKS_DIR, StackError, list_stacks, read_stack_file

    stacks_dir = args.stacks_dir or DEFAULT_STACKS_DIR
    named = [*args.stacks, *args.named_stacks]
    if named:
        targets = [stack_arg(arg, args.stacks_dir) for arg in named]
    else:
        if not stacks_dir.is_dir():
            raise UsageError(f"--stacks-dir {stacks_dir}: no such folder")
        targets = [(name, stacks_dir) for name in list_stacks(stacks_dir)]
    if not targets:
        raise UsageError(f"no stack files (Pulumi.<stack>.yaml) in {stacks_dir}")
    results: list[dict[str, Any]] = []
    for name, folder in targets:
        try:
            plan = admit(read_stack_file(name, folder))
        except StackError as err:
            results.append({"stack": name, "ok": False, "problems": [str(p) for p in err.problems]})
            if args.format == "text":
                print(f"FAIL {err}", file=sys.stderr)
            continue
        s = plan.spec
        offline = not_checked_offline(plan)
        # Valid, but `pulumi up` refuses it until its capacity exists: say so on the same line.
        todo = capacity_needed(name, s) if plan.needs_capacity_purchase else None
        results.append({"stack": name, "ok": True, "hardware": s.hardware, "strategy": s.strategy,
                        "topology": s.topology, "badge": plan.recipe.badge, "todo": todo,
                        "not_checked_offline": offline})  # fmt: skip
        if args.format == "text":
            then = f"; {todo}" if todo else ""
            then += f"; not checked offline: {', '.join(offline)}" if offline else ""
            print(f"ok   {name}: {s.hardware} / {s.strategy} / {s.topology}, {plan.recipe.badge}{then}")
    if args.format == "json":
        print_json(results)
    return 0 if all(r["ok"] for r in results) else 2
