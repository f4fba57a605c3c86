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
    p.add_argument(
        "--wait",
        action="store_true",
        help="a Capacity Block or reservation that has not started: wait for its start, not refuse",
    )
    p.set_defaults(func=run)


def preflight(stack: str, wait: bool) -> None:
    """The stack's capacity must be usable before Pulumi starts (the program checks it again)."""
    from flashfleet.planning import load_stack
    from flashfleet.stack import DEFAULT_STACKS_DIR, StackError
    from flashfleet.stack.capacity import reservation_id
    from flashfleet.stack.files import stack_path

    if not stack_path(stack, DEFAULT_STACKS_DIR).is_file():
        return  # stackops names the missing stack
    try:
        b = load_stack(stack, DEFAULT_STACKS_DIR)
    except StackError as err:
        raise UsageError(str(err)) from None
    if reservation_id(b.spec) is None:
        return  # boto3 only for stacks with a reservation
    from flashfleet.capacity import preflight as capacity_preflight

    try:
        capacity_preflight.run(b, wait=wait or None)
    except capacity_preflight.CapacityRefused as err:
        raise UsageError(f"stack {stack}: {err}") from None


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import stackops

    preflight(args.stack, args.wait)
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
