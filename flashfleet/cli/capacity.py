"""`flashfleet capacity offers|buy STACK`: Capacity Blocks for ML for a stack.

`offers` lists what EC2 sells that fits the stack (read-only). `buy` purchases one offering after
a confirmation, and only one that matches the stack (instance type, node count, zone) and the
request (hours, USD, at most --max-price or the catalog's listed price + 10%, all checked against
EC2's current quote); it tags the reservation flashfleet:stack and writes it into the stack file.
A block cannot be cancelled.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flashfleet.cli.common import UsageError, add_format, add_stack, print_json
from flashfleet.table import aligned

WARNING = (
    "A Capacity Block cannot be cancelled, and `pulumi destroy` cannot remove it: the whole "
    "price is charged whether or not you use it."
)


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _whole(rule: str) -> Any:
    """A whole number above 0, as typed (digits only: no sign, exponent or `4_8`)."""

    def parse(text: str) -> int:
        if not text.strip().isascii() or not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0 [rule: {rule}]")
        return int(text)

    return parse


def _usd(text: str) -> float:
    """A finite price above 0, as typed (argparse's float takes `nan`, `inf`, `-5` and `2_400`)."""
    try:
        value = float(text) if "_" not in text else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a price in USD above 0 [rule: max-price]")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("capacity", help="Capacity Blocks for a stack: list offerings, buy one")
    inner = p.add_subparsers(dest="capacity_command", metavar="offers|buy")
    for name, help_text in (
        ("offers", "Capacity Block offerings that fit the stack (instance type, count, window, price)"),
        ("buy", "buy one offering (asks first: a block cannot be cancelled)"),
    ):
        q = inner.add_parser(name, help=help_text)
        add_stack(q, "stack name, or the path of its file (Pulumi.<stack>.yaml)")
        q.add_argument(
            "--hours",
            type=_whole("block-duration"),
            default=24,
            help="block length: whole days, then weeks (default 24); buy takes only a block this long",
        )
        q.add_argument(
            "--start-after", type=_moment, default=None, metavar="T", help="earliest start (ISO 8601)"
        )
        q.add_argument("--end-before", type=_moment, default=None, metavar="T", help="latest end (ISO 8601)")
        q.add_argument(
            "--ultraserver-type",
            default=None,
            metavar="TYPE",
            help="search UltraServer blocks of TYPE instead",
        )
        q.add_argument(
            "--ultraserver-count",
            type=_whole("ultraserver-count"),
            default=None,
            metavar="N",
            help="UltraServers (default 1)",
        )
        q.add_argument(
            "--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)"
        )
        add_format(q, "text", "json")
        q.set_defaults(func=run)
    buy = inner.choices["buy"]
    buy.add_argument("--offering", required=True, metavar="ID", help="the offering id from `capacity offers`")
    buy.add_argument(
        "--max-price",
        type=_usd,
        default=None,
        metavar="USD",
        help="refuse above this upfront price (default: the catalog's listed price + 10%%; "
        "required where the catalog lists none)",
    )
    buy.add_argument("--yes", action="store_true", help="do not ask (scripts)")
    buy.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the purchase's record goes, under STACK/capacity/ "
        "(default: $FLASHFLEET_RUNS_DIR or ./.runner)",
    )
    p.set_defaults(func=_no_subcommand)


def _no_subcommand(args: argparse.Namespace) -> int:
    raise UsageError("give a subcommand: offers or buy (see flashfleet capacity --help)")


@dataclass
class _Target:
    plan: Any  # the stack's StackPlan
    query: Any  # OfferQuery
    gpus: int  # per instance
    zone: str | None  # the zone the stack is bound to (an existing subnet's), or None


def _context(args: argparse.Namespace) -> _Target:
    from flashfleet.capacity.offers import OfferError, OfferQuery, check_hours
    from flashfleet.cli.common import stack_arg
    from flashfleet.planning import load_stack
    from flashfleet.stack import DEFAULT_STACKS_DIR, AwsSource, StackError
    from flashfleet.stack.capacity_block import block
    from flashfleet.stack.spec import NewNetwork

    # the folder found is where `buy` writes the block, too
    args.stack, args.stacks_dir = stack_arg(args.stack, args.stacks_dir)
    try:
        plan = load_stack(args.stack, args.stacks_dir or DEFAULT_STACKS_DIR)
        check_hours(args.hours)
    except StackError as err:
        raise UsageError(str(err)) from None
    except OfferError as err:
        raise UsageError(f"{err} [rule: {err.rule}]") from None
    src = plan.spec.nodes.source
    if not isinstance(src, AwsSource) or plan.instance is None or block(plan.spec) is None:
        raise UsageError(
            f"stack {plan.stack}: flashfleet:stack.nodes.source.capacity: Capacity Blocks are for AWS stacks "
            "with capacity.kind: block [rule: capacity-block-stack]"
        )
    if args.start_after and args.start_after > datetime.now(UTC) + timedelta(weeks=8):
        raise UsageError("--start-after: a block starts at most 8 weeks ahead [rule: block-lead]")
    query = OfferQuery(
        instance_type=plan.instance.name,
        instance_count=plan.spec.gpu_node_count,
        hours=args.hours,
        start_after=args.start_after,
        end_before=args.end_before,
        # The catalog's UltraServer type when the instance type is sold only that way.
        ultraserver_type=args.ultraserver_type or plan.instance.ultraserver_type,
        ultraserver_count=args.ultraserver_count,
    )
    # A new network follows the block's zone (buy moves it); an existing subnet pins the zone.
    zone = None if isinstance(src.network, NewNetwork) else "subnet"
    return _Target(plan, query, plan.instance.gpus, zone)


def _client(plan: Any) -> Any:
    from flashfleet.aws_client import ec2_client

    return ec2_client(plan.region)


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from flashfleet.aws_client import NoAwsCredentials
    from flashfleet.capacity.offers import OfferError

    t = _context(args)
    try:
        ec2 = _client(t.plan)
    except NoAwsCredentials as err:
        raise UsageError(f"{err}: nothing was asked of EC2") from None
    try:
        if t.zone == "subnet":
            from flashfleet.capacity.reservation import subnet_zone

            t.zone = subnet_zone(ec2, t.plan.spec.nodes.source.network.subnet_id)
        if args.capacity_command == "offers":
            return _offers(args, ec2, t)
        return _buy(args, ec2, t)
    except OfferError as err:
        raise UsageError(f"{err} [rule: {err.rule}]") from None
    except (BotoCoreError, ClientError) as err:
        raise UsageError(f"AWS: {err}") from None


def _offers(args: argparse.Namespace, ec2: Any, t: _Target) -> int:
    from flashfleet.capacity.offers import fitting, iso

    plan, query, zone = t.plan, t.query, t.zone
    offers = fitting(ec2, query, t.gpus, zone)
    if args.format == "json":
        listed = [o.row().model_dump() for o in offers]
        print_json({"stack": plan.stack, "region": plan.region, "offers": listed})
        return 0
    where = f" in {zone}" if zone else ""
    print(
        f"Capacity Block offerings for {plan.stack}: {query.instance_count} x {query.instance_type}, "
        f"{query.hours} h, {plan.region}{where}"
    )
    if not offers:
        print("none: try other --hours, --start-after or --end-before")
        return 0
    rows = [["offering", "type", "n", "hours", "start", "end", "zone", "upfront", "/GPU-h"]]
    for o in offers:
        per = f"{o.price_per_gpu_hour:.2f}" if o.price_per_gpu_hour is not None else "-"
        rows.append([
            o.offering_id, o.instance_type, str(o.instance_count), f"{o.hours:g}", iso(o.start), iso(o.end),
            o.availability_zone, f"{o.upfront_fee:.2f} {o.currency}", per,
        ])  # fmt: skip
    print("\n".join(aligned(rows, right={2, 3, 7, 8})))  # the numbers right-aligned
    # buy searches again with the same terms: EC2 has no lookup by offering id.
    same = f"--hours {query.hours}"
    same += f" --start-after {iso(query.start_after)}" if query.start_after else ""
    same += f" --end-before {iso(query.end_before)}" if query.end_before else ""
    print(f"buy one: flashfleet capacity buy {plan.stack} --offering ID {same} [--max-price USD]")
    return 0


def _confirm(prompt: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("buy: not on a terminal; pass --yes to buy without asking [rule: confirm]")
    return input(prompt).strip().lower() in ("y", "yes")


def _buy(args: argparse.Namespace, ec2: Any, t: _Target) -> int:
    from flashfleet.capacity import purchase
    from flashfleet.capacity.offers import iso, mismatch
    from flashfleet.planning import load_stack
    from flashfleet.stack import DEFAULT_STACKS_DIR, StackError
    from flashfleet.stack.capacity_block import block, usable_until
    from flashfleet.stack.files import stack_path
    from flashfleet.user_files import UserFileError

    plan, query, zone = t.plan, t.query, t.zone
    now = datetime.now(UTC)
    held = block(plan.spec)
    if held is not None and held.purchased is not None and held.purchased.end > now:
        raise UsageError(
            f"stack {plan.stack}: already holds block {held.reservation_id} until {iso(held.purchased.end)}; "
            "a second block would replace it in the stack file [rule: block-held]"
        )
    bound = purchase.ceiling(query, args.max_price)  # before asking EC2: no bound, no purchase
    offer = purchase.current_offer(ec2, query, args.offering, t.gpus)  # EC2's quote now, not the listing's
    wrong = mismatch(offer, query, zone)
    if wrong is not None:
        raise wrong
    purchase.check_price(offer, bound)
    summary = (
        f"Buy {offer.offering_id} for {plan.stack}: {offer.instance_count} x {offer.instance_type} in "
        f"{offer.availability_zone}, {iso(offer.start)} to {iso(offer.end)} ({offer.hours:g} h; nodes until "
        f"{iso(usable_until(offer.end))}), {offer.upfront_fee:.2f} {offer.currency} upfront"
    )
    print(summary)
    print(WARNING)
    if not args.yes and not _confirm("Buy it? [y/N] "):
        print("nothing bought")
        return 1
    bought = purchase.buy(ec2, offer, plan.stack, now)
    # The id first: if no file can be written, the user still has it.
    print(f"bought {bought.reservation_id} ({bought.state}), tagged flashfleet:stack={plan.stack}")
    path = stack_path(plan.stack, args.stacks_dir or DEFAULT_STACKS_DIR)
    kept = _keep_receipt(args, plan, bought, path)
    try:
        purchase.record(path, bought)
    except UserFileError as err:  # the file is as it was: the purchase's record is printed instead
        if kept is not None:
            print(purchase.record_text(bought), end="")
        where = f"its record is in {kept}; " if kept is not None else ""
        print(
            f"flashfleet capacity buy: {err}; the block IS bought: {where}put the `capacity` section "
            f"printed above under flashfleet:stack.nodes.source of {path.name}",
            file=sys.stderr,
        )
        return 1
    try:
        load_stack(plan.stack, args.stacks_dir or DEFAULT_STACKS_DIR)
    except StackError as err:
        print(f"flashfleet capacity buy: warning: {path.name} no longer validates: {err}", file=sys.stderr)
        return 1
    print(
        f"{path.name}: reservationId {bought.reservation_id}, zone {bought.availability_zone}, window written"
    )
    print(f"next: flashfleet up {plan.stack}" + (" --wait" if bought.start > now else ""))
    return 0 if kept is not None else 1  # the stack file holds the block; the record's failure is said


def _keep_receipt(args: argparse.Namespace, plan: Any, bought: Any, stack_file: Path) -> Path | None:
    """Write the purchase's own record under the runs folder and say where; when it cannot be
    written, print it instead and say so in one line (None). The block cannot be cancelled: its
    record must not live only in a stack file that a full disk or an edit can lose."""
    from flashfleet.bringup.run_dirs import default_runs_root
    from flashfleet.capacity.receipt import receipt_path, receipt_text, write_receipt
    from flashfleet.user_files import UserFileError

    where = receipt_path(args.runs_dir or default_runs_root(), plan.stack, bought)
    text = receipt_text(bought, stack=plan.stack, region=plan.region, stack_file=stack_file.resolve())
    try:
        write_receipt(where, text)
    except UserFileError as err:
        print(text, end="")
        print(
            f"flashfleet capacity buy: {err}; the block IS bought: its record is printed above, keep it",
            file=sys.stderr,
        )
        return None
    print(f"record of the purchase: {where}")
    return where
