"""`flashfleet configure STACK`: run the playbooks against the stack's hosts.

With `--inventory FILE`, against existing hosts and without Pulumi; otherwise with the
inventory, HF token and API key of the stack's outputs. The API key (serving.apiKey: required)
is $FLASHFLEET_API_KEY when set, else the stack's `apiKey` secret output; like the token it
reaches the roles only through the ansible-playbook process environment. Exit status: 0 ok,
1 the playbook failed, 2 bad input (refused before any host is touched).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from flashfleet.cli.common import UsageError, add_stack


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.cli.shared.cliargs import add_run_args

    p = sub.add_parser("configure", help="run the playbooks against the stack's hosts")
    add_stack(
        p, "stack name, or the path of its file (without --inventory: in the Pulumi project's stacks/); "
        "the inventory's flashfleet_stack must match",
    )  # fmt: skip
    add_run_args(p, "site.yml")
    p.add_argument("--check", action="store_true", help="Ansible check mode: report, change nothing")
    p.add_argument("--limit", default=None, help="only these hosts or groups (Ansible pattern)")
    p.add_argument("--tags", default=None, help="only tasks with these tags (comma separated)")
    p.add_argument(
        "--reconverge", action="store_true",
        help="run every role, even where the node's converge record shows nothing changed",
    )  # fmt: skip
    p.add_argument(
        "-e", "--extra-var", dest="extra_vars", action="append", default=[], metavar="NAME=VALUE",
        help="role argument for this run (repeatable), checked against the role's argument_specs",
    )  # fmt: skip
    p.set_defaults(func=run)


def stack_inputs(stack: str) -> tuple[dict[str, Any], str | None, str | None]:
    """Inventory, HF token and API key from the stack's outputs (through the Pulumi CLI)."""
    from flashfleet import outputs
    from flashfleet.cli.shared import stackops

    try:
        outs = stackops.outputs(stack)
    except (stackops.PulumiUnavailable, stackops.PulumiError) as err:
        raise UsageError(str(err)) from None
    from flashfleet.bringup.secret_env import check_secret
    from flashfleet.cli.shared.stack_inventory import inventory_of
    from flashfleet.stack.files import API_KEY_KEY, HF_TOKEN_KEY

    inventory = inventory_of(outs)
    if inventory is None:
        raise UsageError(f"stack {stack} has no {outputs.INVENTORY} output yet (flashfleet up {stack})")
    token_out, key_out = outs.get(outputs.HF_TOKEN), outs.get(outputs.API_KEY)
    token = str(token_out.value) if token_out else None
    key = str(key_out.value) if key_out else None
    check_secret(HF_TOKEN_KEY, token)  # they are the stack's flashfleet:* secrets
    check_secret(API_KEY_KEY, key)
    return inventory, token, key


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import handoff
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.role_vars import OPTION_PREFIX, check_role_vars
    from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV, check_env_secrets
    from flashfleet.cli.common import pulumi_stack_arg
    from flashfleet.cli.shared.cliargs import load_inventory, parse_extravars, project_of

    # the name is checked first: a folder under the runs folder is made for it
    args.stack = pulumi_stack_arg(args.stack, "configure", inventory=args.inventory, inventory_hint=True)
    try:
        check_env_secrets()  # the caller's own secrets first: every run inherits them
        project = project_of(args)
        extravars = parse_extravars(args.extra_vars)
        check_role_vars(project, (args.playbook,), extravars, OPTION_PREFIX)  # before any host is touched
        if args.inventory is not None:
            inventory, token, key = load_inventory(args.inventory), os.environ.get(TOKEN_ENV), None
        else:
            inventory, token, key = stack_inputs(args.stack)
        key = os.environ.get(API_KEY_ENV) or key  # None: the run inherits no key but the caller's
        _require_api_key(inventory, key)
        result = handoff.run_recorded(
            args.playbook, inventory, project=project, runs_root=args.runs_dir, extravars=extravars,
            hf_token=token, api_key=key, stack=args.stack, check=args.check, limit=args.limit, tags=args.tags,
            reconverge=args.reconverge, emit=lambda line: print(line, file=sys.stderr, flush=True),
        )  # fmt: skip
    except BringupInputError as err:
        raise UsageError(str(err)) from None
    print(result.summary())
    print(f"timeline: {result.run_dir / 'timeline.png'}")
    return 0 if result.ok else 1


def _require_api_key(inventory: dict[str, Any], key: str | None) -> None:
    """A host whose servers demand a key gets one, or nothing is touched (exit 2)."""
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.secret_env import API_KEY_ENV

    hosts = (inventory.get("all") or {}).get("hosts") or {}
    needing = sorted(h for h, v in hosts.items() if (v or {}).get("flashfleet_api_key_required"))
    if needing and not key:
        raise BringupInputError(
            f"flashfleet_api_key_required: {', '.join(needing)} serve with an API key and none is "
            f"given: export {API_KEY_ENV} (e.g. `read -rs {API_KEY_ENV} && export {API_KEY_ENV}`) "
            "or set the flashfleet:apiKey secret"
        )
