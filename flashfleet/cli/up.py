"""`flashfleet up STACK`: `pulumi up` through the Automation API (nodes, then the playbooks).

Exit status: 0 ok, 1 the update failed, 2 bad input or no Pulumi CLI.
"""

from __future__ import annotations

import argparse
import sys

from flashfleet.cli.common import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="bring the stack up: nodes, preparation, serving, smoke checks")
    p.add_argument("stack", help="stack name (stacks/Pulumi.STACK.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import stackops

    try:
        outs = stackops.up(args.stack, lambda line: print(line, end="" if line.endswith("\n") else "\n"))
    except (stackops.PulumiUnavailable, stackops.UnknownStack) as err:
        raise UsageError(str(err)) from None
    except stackops.StackError as err:
        print(f"flashfleet up: {err}", file=sys.stderr)
        return 1
    for key, out in sorted(outs.items()):
        if key != "inventory":
            print(f"{key}: {out.shown()}")
    return 0
