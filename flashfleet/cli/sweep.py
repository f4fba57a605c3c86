"""`flashfleet sweep`: list (and with --yes delete) expired or orphaned flashfleet resources."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from flashfleet.cli.common import UsageError, add_format, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep", help="find flashfleet resources past flashfleet:expires-at or of deleted stacks"
    )
    p.add_argument("--stack", default=None, help="only resources tagged with this stack")
    p.add_argument("--yes", action="store_true", help="delete what is listed as stale (default: dry run)")
    p.add_argument("--all", action="store_true", help="also list the flashfleet resources that are kept")
    p.add_argument("--stacks-dir", type=Path, default=Path("stacks"), help="where Pulumi.<stack>.yaml live")
    p.add_argument("--region", default=None, help="AWS region (default: the standard AWS settings)")
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from flashfleet import sweep

    try:
        stacks = sweep.known_stacks(args.stacks_dir)
    except FileNotFoundError as err:
        raise UsageError(f"{err}; give --stacks-dir") from None
    try:
        ec2 = sweep.ec2_client(args.region)
        unlisted: dict[str, str] = {}
        findings = sweep.find(ec2, now=datetime.now(UTC), stacks=stacks, stack=args.stack, unlisted=unlisted)
    except (BotoCoreError, ClientError) as err:
        raise UsageError(f"AWS: {err}") from None
    for kind, error in unlisted.items():
        print(f"flashfleet sweep: warning: could not list {kind}s, not swept: {error}", file=sys.stderr)
    shown = findings if args.all else [f for f in findings if f.stale]
    deletions = sweep.delete(ec2, findings) if args.yes else []

    if args.format == "json":
        print_json(
            {
                "dry_run": not args.yes,
                "findings": [f.to_dict() for f in shown],
                "deleted": [d.finding.id for d in deletions if d.error is None],
                "errors": {d.finding.id: d.error for d in deletions if d.error is not None},
                "unlisted": unlisted,
            }
        )
    else:
        verb = "delete" if args.yes else "would delete"
        for f in shown:
            action = verb if f.stale else "keep"
            print(
                f"{action:12} {f.kind:15} {f.id:22} stack={f.stack or '-'} role={f.role or '-'}  {f.reason}"
            )
        stale = sum(f.stale for f in findings)
        if not args.yes:
            print(f"{stale} stale of {len(findings)} flashfleet resources; dry run, nothing changed")
        for d in deletions:
            if d.error is not None:
                print(
                    f"flashfleet sweep: could not delete {d.finding.kind} {d.finding.id}: {d.error}",
                    file=sys.stderr,
                )
        if args.yes:
            ok = sum(d.error is None for d in deletions)
            print(f"deleted {ok} of {stale} stale resources")
    return 1 if any(d.error is not None for d in deletions) else 0
