"""`flashfleet ls`: every stack of the project, with its state, endpoint, expiry and cost so far
(as `sky status` and `dstack ps` list theirs).

The stack files name the stacks; the Pulumi backend says which are up. Cost so far is the
plan's hourly price (the catalog's, with its source, or the stack's own) times the hours since
the first successful update after the last destroy; existing hosts and Kubernetes are not billed
through flashfleet, so their cost is "unknown". Without the Pulumi CLI it lists the files and
says, in one line on stderr, that their state is unknown.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from flashfleet.cli.common import add_format, print_json
from flashfleet.table import aligned


class StackRow(BaseModel):
    stack: str
    hardware: str | None = None
    source: str | None = None
    state: str  # "up (N resources)", "empty", "not initialised", "unknown", "invalid: ..."
    endpoint: str | None = None
    expires_at: str | None = None
    hourly_usd: float | None = None
    price_source: str | None = None
    live_since: str | None = None
    cost_so_far_usd: float | None = None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ls", help="every stack: state, endpoint, expiry, cost so far")
    p.add_argument(
        "--stacks-dir", type=Path, default=None, help="folder of stack files (default: the project's stacks/)"
    )
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def _row(name: str, stacks_dir: Path) -> StackRow:
    from flashfleet.planning import load_stack
    from flashfleet.stack import StackError

    try:
        plan = load_stack(name, stacks_dir)
    except StackError as err:
        return StackRow(stack=name, state=f"invalid: {str(err).splitlines()[0]}")
    return StackRow(
        stack=name, hardware=plan.spec.hardware, source=plan.spec.nodes.source.kind, state="unknown",
        hourly_usd=plan.hourly_cost_usd, price_source=plan.price_source,
    )  # fmt: skip


def _live(row: StackRow, resources: int | None, now: datetime) -> StackRow:
    from flashfleet import outputs
    from flashfleet.cli.shared import stackops

    if not resources:
        return row.model_copy(update={"state": "empty" if resources == 0 else "unknown"})
    outs, since = stackops.live_state(row.stack)  # one stack selection for both
    update: dict[str, object] = {"state": f"up ({resources} resources)"}
    for key, field in ((outputs.ENDPOINT, "endpoint"), (outputs.EXPIRES_AT, "expires_at")):
        if key in outs and not outs[key].secret:
            update[field] = str(outs[key].value)
    if since is not None:
        update["live_since"] = since.astimezone(UTC).isoformat(timespec="seconds")
        if row.hourly_usd is not None:
            hours = max(0.0, (now - since).total_seconds() / 3600)
            update["cost_so_far_usd"] = round(row.hourly_usd * hours, 2)
    return row.model_copy(update=update)


def run(args: argparse.Namespace) -> int:
    from flashfleet.cli.shared import stackops
    from flashfleet.stack import list_stacks

    stacks_dir = args.stacks_dir or stackops.project_dir() / "stacks"
    rows = [_row(name, stacks_dir) for name in list_stacks(stacks_dir)]
    try:
        held = stackops.summaries()
    except (stackops.PulumiUnavailable, stackops.PulumiError) as err:
        print(f"flashfleet ls: state unknown: {err}", file=sys.stderr)
    else:
        now = datetime.now(UTC)
        live = []
        for row in rows:
            if row.state.startswith("invalid"):
                live.append(row)
            elif row.stack not in held:
                live.append(row.model_copy(update={"state": "not initialised"}))
            else:
                try:
                    live.append(_live(row, held[row.stack], now))
                except (stackops.PulumiUnavailable, stackops.PulumiError) as err:
                    live.append(row.model_copy(update={"state": f"unknown: {err}"}))
        rows = live
    if args.format == "json":
        print_json([r.model_dump() for r in rows])
        return 0
    table = [["STACK", "HARDWARE", "SOURCE", "STATE", "ENDPOINT", "EXPIRES", "COST SO FAR"]]
    for r in rows:
        if r.cost_so_far_usd is not None:
            cost = f"${r.cost_so_far_usd:.2f} (${r.hourly_usd:.2f}/h, {r.price_source})"
        else:
            cost = "unknown" if r.state.startswith("up") else "-"
        table.append(
            [
                r.stack,
                r.hardware or "-",
                r.source or "-",
                r.state,
                r.endpoint or "-",
                r.expires_at or "-",
                cost,
            ]
        )
    print("\n".join(aligned(table)))
    return 0
