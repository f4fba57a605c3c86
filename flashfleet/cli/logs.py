"""`flashfleet logs STACK [--node N] [--follow]`: the last lines of each serving container's output.

Read on the nodes over the same Ansible connection a bring-up uses (pinned host keys, the
login user, sudo): playbooks/logs.yml reads each serving unit's journal, which holds its
container's output (the unit runs `docker run` in the foreground). Exit status: 0 every node
answered, 1 a node did not, 2 bad input (refused before any host is touched). `--follow` keeps
reading over SSH until Ctrl-C, which exits 0 (cli/shared/logs_follow.py says why it is not Ansible).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from flashfleet.cli.common import UsageError, add_stack

PLAYBOOK = "logs.yml"
READ_TASK = "Logs | read each serving unit's journal"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.cli.shared.cliargs import add_inventory_arg, add_runs_dir_arg

    p = sub.add_parser("logs", help="the last lines of each serving container's output on a stack's nodes")
    add_stack(p, "stack name, or the path of its file (the inventory's flashfleet_stack must match)")
    p.add_argument("--node", type=int, default=None, metavar="N", help="only node N (flashfleet_node_index)")
    p.add_argument(
        "--lines", type=int, default=100, metavar="N", help="lines per container (default: %(default)s)"
    )
    p.add_argument(
        "-f", "--follow", action="store_true",
        help="keep printing new lines from every node until Ctrl-C (over SSH, host keys pinned)",
    )  # fmt: skip
    add_inventory_arg(p)
    add_runs_dir_arg(p)
    p.set_defaults(func=run)


def node_hosts(inventory: dict[str, Any], node: int | None) -> list[str]:
    """The inventory's hosts that serve, or only node `node`'s; refuses a node the stack lacks."""
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    serving = {h: v for h, v in hosts.items() if (v or {}).get("flashfleet_processes")}
    if node is None:
        return sorted(serving)
    chosen = sorted(h for h, v in serving.items() if v.get("flashfleet_node_index") == node)
    if not chosen:
        known = sorted({v.get("flashfleet_node_index") for v in serving.values()}, key=str)
        raise UsageError(f"--node {node}: no such serving node (the stack's: {', '.join(map(str, known))})")
    return chosen


def journals(events_log: Path) -> list[tuple[str, str, str]]:
    """(host, container, journal text) for each container the run read, in the run's order."""
    found = []
    for line in events_log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        data = event.get("event_data") or {}
        if event.get("event") == "runner_item_on_ok" and data.get("task") == READ_TASK:
            res = data.get("res") or {}
            found.append(
                (str(data.get("host")), str((res.get("item") or {}).get("container_name")), res["stdout"])
            )
    return found


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup import handoff
    from flashfleet.bringup.errors import BringupInputError, NoInventory
    from flashfleet.cli.common import stack_arg
    from flashfleet.cli.shared.cliargs import load_inventory
    from flashfleet.cli.shared.stack_inventory import stack_inventory

    args.stack = stack_arg(args.stack, None)[0]
    if args.lines < 1:
        raise UsageError(f"--lines {args.lines}: must be at least 1")
    try:
        # the stack's outputs, else its last recorded `configure` run: what bench reads too
        inventory = (
            load_inventory(args.inventory)
            if args.inventory is not None
            else stack_inventory(args.stack, args.runs_dir)
        )
        hosts = node_hosts(inventory, args.node)
        if not hosts:
            raise UsageError(f"stack {args.stack}: no node serves (nothing to read)")
        if args.follow:
            from flashfleet.cli.shared.logs_follow import follow

            return follow(inventory, hosts, args.lines)
        result = handoff.run_recorded(
            PLAYBOOK, inventory, runs_root=args.runs_dir, stack=args.stack,
            extravars={"flashfleet_logs_lines": args.lines}, limit=",".join(hosts),
        )  # fmt: skip
    except (BringupInputError, NoInventory) as err:
        raise UsageError(str(err)) from None
    for host, container, text in journals(result.events_log):
        print(f"==> {host} {container} <==")
        print(text)
    for host in result.unreachable:
        print(f"flashfleet logs: {host}: unreachable", file=sys.stderr)
    if not result.ok:
        print(result.summary(), file=sys.stderr)
    return 0 if result.ok else 1
