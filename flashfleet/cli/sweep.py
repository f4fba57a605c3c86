"""`flashfleet sweep`: list (and with --yes delete) flashfleet cloud resources past their expiry.

Exit: 0 done, 1 something could not be listed or deleted (the rest was still swept),
2 refused (bad input, no AWS, --orphans with no Pulumi backend answering).

Deletion needs evidence the resource carries (its expiry) or the user's own word (--stack S with
--orphans): a Pulumi backend not knowing a stack is reported, never enough alone.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from flashfleet.cli.common import UsageError, add_format, print_json
from flashfleet.components.tags import valid_stack
from flashfleet.sweep import KINDS  # standard library only; boto3 loads when a sweep runs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep",
        # a destructive flag is spelled out: argparse would otherwise take --ye for --yes
        allow_abbrev=False,
        help="find flashfleet cloud resources whose flashfleet:expires-at tag has passed",
        description=(
            "Lists flashfleet's AWS resources (tag flashfleet:managed-by exactly flashfleet, or no "
            "managed-by tag and both flashfleet:stack and flashfleet:expires-at) whose expires-at "
            "has passed; --yes deletes them, except what a live instance still uses (in any region, "
            "for IAM). Nothing else is ever touched."
        ),
    )
    p.add_argument(
        "--stack",
        action="append",
        default=None,
        metavar="S",
        help="only resources tagged with this stack, named or by the path of its file (repeatable); "
        "with --orphans, also deletes the unexpired resources of a named stack the Pulumi backend "
        "does not know",
    )
    p.add_argument("--yes", action="store_true", help="delete what is listed as stale (default: dry run)")
    p.add_argument("--all", action="store_true", help="also list the flashfleet resources that are kept")
    p.add_argument(
        "--orphans",
        action="store_true",
        help="report the resources of stacks the Pulumi backend does not know (asks the backend; "
        "refused when none answers). Only expired ones are deleted, unless their stack is named "
        "with --stack: one backend (a per-user one) does not know every user's stacks",
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
    from flashfleet.cli.common import stack_arg

    # a stack file's path names its stack, as on every command; the tags hold the name
    try:
        args.stack = [stack_arg(stack, None)[0] for stack in args.stack] if args.stack else None
    except UsageError as err:
        raise UsageError(f"--stack: {err}") from None
    for stack in args.stack or ():
        if not valid_stack(stack):
            raise UsageError(
                f"--stack: {stack!r} is not a stack name (a letter or digit, then letters, digits, "
                "'.', '_' or '-', at most 100 in all) [rule: stack-name]"
            )
    known = None
    if args.orphans:
        try:
            known = sweep.backend_stacks()
        except sweep.BackendUnavailable as err:
            raise UsageError(f"--orphans: {err}; refusing to judge orphans") from None
    kinds = [k for k in KINDS if k not in args.skip]
    unlisted: dict[str, str] = {}
    region = args.region or _stacks_region(args.stack or ())
    try:
        sweep.check_account(region)
    except sweep.NoAccount as err:
        raise UsageError(str(err)) from None
    try:
        clients = sweep.clients(region)
        findings = sweep.find(
            clients, now=datetime.now(UTC), stacks=args.stack, known=known, kinds=kinds, unlisted=unlisted
        )
    except (BotoCoreError, ClientError) as err:
        raise UsageError(f"AWS: {err}") from None
    shown = findings if args.all else [f for f in findings if f.stale]
    deletions = sweep.delete(clients, findings) if args.yes else []
    deleted = [d for d in deletions if d.error is None and d.skipped is None]
    failed = [d for d in deletions if d.error is not None]
    skipped = [d for d in deletions if d.skipped is not None]
    orphan_stacks = sorted({f.stack for f in findings if f.orphan and f.stack})

    if args.format == "json":
        print_json(
            {
                "dry_run": not args.yes,
                "findings": [f.model_dump() for f in shown],
                "deleted": [d.finding.id for d in deleted],
                "kept_in_use": {d.finding.id: d.skipped for d in skipped},
                "errors": {d.finding.id: d.error for d in failed},
                "unlisted": unlisted,
                "orphan_stacks": orphan_stacks,
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
        if orphan_stacks:
            print(
                f"stacks the Pulumi backend does not know: {', '.join(orphan_stacks)} "
                "(only their expired resources are stale; --orphans --stack S takes all of S)"
            )
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


def _stacks_region(stacks: tuple[str, ...] | list[str]) -> str | None:
    """The `aws:region` the named stacks' files set, when this checkout has them and they agree."""
    from flashfleet.stack import StackError
    from flashfleet.stack.files import read_stack_file

    regions = set()
    for stack in stacks:
        try:
            region = read_stack_file(stack).region
        except StackError:
            continue  # a stack of another checkout, or gone: its tags still name it
        if region:
            regions.add(region)
    if len(regions) > 1:
        raise UsageError(
            f"--stack: the stacks are in {', '.join(sorted(regions))}: sweep one --region at a time"
        )
    return regions.pop() if regions else None
