"""`flashfleet configure STACK`: run the playbooks against the stack's hosts.

With `--inventory FILE`, against existing hosts and without Pulumi; otherwise with the
inventory and HF token of the stack's outputs. Exit status: 0 ok, 1 the playbook failed,
2 bad input (refused before any host is touched).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from flashfleet.cli.common import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.bringup.cliargs import add_run_args

    p = sub.add_parser("configure", help="run the playbooks against the stack's hosts")
    add_run_args(p, "site.yml")
    p.add_argument("--check", action="store_true", help="Ansible check mode: report, change nothing")
    p.add_argument("--limit", default=None, help="only these hosts or groups (Ansible pattern)")
    p.add_argument("--tags", default=None, help="only tasks with these tags (comma separated)")
    p.add_argument(
        "-e", "--extra-var", dest="extra_vars", action="append", default=[], metavar="NAME=VALUE",
        help="role argument for this run (repeatable), checked against the role's argument_specs",
    )  # fmt: skip
    p.set_defaults(func=run)


def stack_inputs(stack: str) -> tuple[dict[str, Any], str | None]:
    """Inventory and HF token from the stack's outputs (through the Pulumi CLI)."""
    from flashfleet import outputs
    from flashfleet.bringup import stackops

    try:
        outs = stackops.outputs(stack)
    except (stackops.PulumiUnavailable, stackops.StackError) as err:
        raise UsageError(str(err)) from None
    if outputs.INVENTORY not in outs:
        raise UsageError(f"stack {stack} has no {outputs.INVENTORY} output yet (flashfleet up {stack})")
    from flashfleet.bringup.contract import restore_nulls

    token = outs.get(outputs.HF_TOKEN)
    # stack outputs drop null-valued keys, as the provider's inputs do
    return restore_nulls(outs[outputs.INVENTORY].value), (str(token.value) if token else None)


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import handoff
    from flashfleet.bringup.cliargs import load_inventory, parse_extravars, project_of
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.playbook_run import TOKEN_ENV

    try:
        project = project_of(args)
        extravars = parse_extravars(args.extra_vars)
        if args.inventory is not None:
            inventory, token = load_inventory(args.inventory), os.environ.get(TOKEN_ENV)
        else:
            inventory, token = stack_inputs(args.stack)
        result = handoff.run(
            args.playbook, inventory, project=project, runs_root=args.runs_dir, extravars=extravars,
            hf_token=token, stack=args.stack, check=args.check, limit=args.limit, tags=args.tags,
            emit=lambda line: print(line, file=sys.stderr, flush=True),
        )  # fmt: skip
    except BringupInputError as err:
        raise UsageError(str(err)) from None
    print(result.summary())
    print(f"timeline: {result.run_dir / 'timeline.png'}")
    return 0 if result.ok else 1
