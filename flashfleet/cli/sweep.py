"""`flashfleet sweep`: list (and with --yes delete) flashfleet cloud resources past their expiry.

Exit: 0 done, 1 something could not be listed or deleted (the rest was still swept),
2 refused (bad input, no AWS, --orphans with no Pulumi backend answering).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from flashfleet.cli.common import UsageError, add_format, print_json
from flashfleet.sweep import KINDS  # standard library only; boto3 loads when a sweep runs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep",
        help="find flashfleet cloud resources whose flashfleet:expires-at tag has passed",
        description=(
            "Lists flashfleet's AWS resources (tag flashfleet:managed-by=flashfleet, or both "
            "flashfleet:stack and flashfleet:expires-at) whose expires-at has passed; --yes deletes "
            "them, except what a live instance still uses. Nothing else is ever touched."
        ),
    )
    p.add_argument("--stack", default=None, help="only resources tagged with this stack")
    p.add_argument("--yes", action="store_true", help="delete what is listed as stale (default: dry run)")
    p.add_argument("--all", action="store_true", help="also list the flashfleet resources that are kept")
    p.add_argument(
        "--orphans",
        action="store_true",
        help="also count as stale the resources of stacks the Pulumi backend no longer knows "
        "(asks the backend; refused when none answers)",
    )
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=KINDS,
        metavar="KIND",
        help=f"do not look at this kind (repeatable): {', '.join(KINDS)}",
    )
    p.add_argument("--region", default=None, help="AWS region (default: the standard AWS settings)")
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from flashfleet import sweep

    orphans = None
    if args.orphans:
        try:
            orphans = sweep.backend_stacks()
        except sweep.BackendUnavailable as err:
            raise UsageError(f"--orphans: {err}; refusing to judge orphans") from None
    kinds = [k for k in KINDS if k not in args.skip]
    unlisted: dict[str, str] = {}
    try:
        clients = sweep.clients(args.region)
        findings = sweep.find(
            clients, now=datetime.now(UTC), stack=args.stack, orphans=orphans, kinds=kinds, unlisted=unlisted
        )
    except (BotoCoreError, ClientError) as err:
        raise UsageError(f"AWS: {err}") from None
    shown = findings if args.all else [f for f in findings if f.stale]
    deletions = sweep.delete(clients, findings) if args.yes else []
    deleted = [d for d in deletions if d.error is None and d.skipped is None]
    failed = [d for d in deletions if d.error is not None]
    skipped = [d for d in deletions if d.skipped is not None]

    if args.format == "json":
        print_json(
            {
                "dry_run": not args.yes,
                "findings": [f.to_dict() for f in shown],
                "deleted": [d.finding.id for d in deleted],
                "kept_in_use": {d.finding.id: d.skipped for d in skipped},
                "errors": {d.finding.id: d.error for d in failed},
                "unlisted": unlisted,
            }
        )
    else:
        verb = "delete" if args.yes else "would delete"
        for f in shown:
            action = verb if f.stale else "keep"
            print(
                f"{action:12} {f.kind:16} {f.id:22} stack={f.stack or '-'} role={f.role or '-'}  {f.reason}"
            )
        stale = sum(f.stale for f in findings)
        if not args.yes:
            print(f"{stale} stale of {len(findings)} flashfleet resources; dry run, nothing changed")
        for d in skipped:
            print(f"kept         {d.finding.kind:16} {d.finding.id:22} {d.skipped}")
        if args.yes:
            print(f"deleted {len(deleted)} of {stale} stale resources")
    for d in failed:
        print(
            f"flashfleet sweep: could not delete {d.finding.kind} {d.finding.id}: {d.error}", file=sys.stderr
        )
    for kind, error in unlisted.items():
        print(
            f"flashfleet sweep: error: could not list {kind}s, not swept: {error} "
            f"(--skip {kind} to leave them out knowingly)",
            file=sys.stderr,
        )
    return 1 if failed or unlisted else 0
