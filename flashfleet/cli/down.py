"""`flashfleet down STACK`: `pulumi destroy` through the Automation API (teardown.yml runs first,
best effort), or with `--inventory FILE` teardown.yml on existing hosts without Pulumi.

Exit status: 0 gone (unreachable hosts are warnings), 1 the teardown or destroy failed,
2 bad input or no Pulumi CLI.
"""

from __future__ import annotations

import argparse
import sys

from flashfleet.cli.common import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.bringup.cliargs import add_run_args

    p = sub.add_parser("down", help="tear the stack down (pulumi destroy, or teardown.yml on existing hosts)")
    add_run_args(p, "teardown.yml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import stackops
    from flashfleet.bringup.cliargs import load_inventory, project_of
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.teardown import TeardownError, teardown_hosts

    try:
        if args.inventory is None:
            stackops.destroy(args.stack, lambda line: print(line, end="" if line.endswith("\n") else "\n"))
            return 0
        result = teardown_hosts(
            load_inventory(args.inventory), project=project_of(args), playbook=args.playbook,
            runs_root=args.runs_dir, stack=args.stack,
        )  # fmt: skip
    except (stackops.PulumiUnavailable, stackops.UnknownStack, BringupInputError) as err:
        raise UsageError(str(err)) from None
    except (stackops.StackError, TeardownError) as err:
        print(f"flashfleet down: {err}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0
