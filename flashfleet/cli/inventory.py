"""`flashfleet inventory STACK`: the Ansible inventory a stack's existing hosts get, offline.

The same inventory the Pulumi program exports as its `inventory` output, built from the stack
file alone: what `flashfleet configure|down STACK --inventory FILE` takes without Pulumi.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flashfleet.cli.common import UsageError, add_format, add_stack, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "inventory",
        help="print the Ansible inventory of a stack's existing hosts (for configure/down --inventory)",
    )
    add_stack(p, "stack name, or the path of its file (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    add_format(p, "yaml", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.cli.common import stack_arg
    from flashfleet.inventory import build_inventory
    from flashfleet.planning import load_stack
    from flashfleet.stack import ExistingSource, StackError

    name, folder = stack_arg(args.stack, args.stacks_dir)
    try:
        b = load_stack(name, folder)
    except StackError as err:
        raise UsageError(str(err)) from None
    src = b.spec.nodes.source
    if not isinstance(src, ExistingSource):
        if src.kind == "kubernetes":
            raise UsageError(f"stack {name}: a Kubernetes stack has no hosts and no Ansible inventory")
        raise UsageError(
            f"stack {name}: AWS nodes get their addresses at `flashfleet up {name}`; "
            f"then `pulumi stack output inventory --stack {name}` prints it"
        )
    inventory = build_inventory(b, src.ssh_addresses(), src.private_addresses())
    if args.format == "json":
        print_json(inventory)
    else:
        from flashfleet.cli.common import yaml_text

        sys.stdout.write(
            f"# flashfleet inventory {name}: for `flashfleet configure {name} --inventory FILE`\n"
        )
        sys.stdout.write(yaml_text(inventory, default_flow_style=False, width=1000))
    return 0
