"""The pre-flight check of a stack's capacity, run before ``pulumi up`` registers any resource.

A block or On-Demand Capacity Reservation stack must point at a reservation that exists, sits in
the stack's availability zone, holds the stack's instance type and count, and is active now. A
refusal is one line naming the reservation and the rule. A scheduled block says when it starts
(or is waited for); an expired one says when it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flashfleet.capacity.offers import iso
from flashfleet.planning import StackPlan
from flashfleet.stack.capacity_block import PLACEHOLDER_RESERVATION, block, reservation_id, usable_until
from flashfleet.stack.errors import STACK_KEY
from flashfleet.stack.spec import AwsSource, NewNetwork

FIELD = f"{STACK_KEY}.nodes.source.capacity.reservationId"
NOT_YET = {"scheduled", "payment-pending", "pending", "assessing", "delayed"}
POLL = timedelta(minutes=1)


class CapacityRefused(Exception):
    """``pulumi up`` must not start: one line with the reservation and the rule."""

    def __init__(self, reservation: str, message: str, rule: str) -> None:
        self.reservation, self.message, self.rule = reservation, message, rule
        super().__init__(f"capacity reservation {reservation}: {message} [rule: {rule}]")


class NotStarted(CapacityRefused):
    """A reservation that becomes usable at ``start``: refused now, or waited for."""

    def __init__(self, reservation: str, message: str, start: datetime | None) -> None:
        super().__init__(reservation, message, "capacity-scheduled")
        self.start = start


@dataclass(frozen=True)
class Need:
    """What the stack needs of its reservation."""

    reservation_id: str
    kind: str  # "block" | "reservation"
    instance_type: str
    instance_count: int
    availability_zone: str | None  # None: read from the existing subnet
    subnet_id: str | None


@dataclass(frozen=True)
class Reservation:
    """The live reservation, as DescribeCapacityReservations reports it."""

    id: str
    state: str
    reservation_type: str
    instance_type: str
    availability_zone: str
    total: int
    start: datetime | None
    end: datetime | None

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> Reservation:
        return cls(
            id=raw["CapacityReservationId"],
            state=raw["State"],
            reservation_type=raw.get("ReservationType", "default"),
            instance_type=raw["InstanceType"],
            availability_zone=raw["AvailabilityZone"],
            total=int(raw["TotalInstanceCount"]),
            start=raw.get("StartDate"),
            end=raw.get("EndDate"),
        )

    @property
    def usable_end(self) -> datetime | None:
        """When the nodes must be gone: a block's end less AWS's margin; an ODCR's end as is
        (at an ODCR's end its instances keep running at the on-demand rate)."""
        if self.end is None:
            return None
        return usable_until(self.end) if self.reservation_type == "capacity-block" else self.end


def need(plan: StackPlan) -> Need | None:
    """The stack's capacity need, or None when it runs on-demand or off AWS."""
    rid = reservation_id(plan.spec)
    src = plan.spec.nodes.source
    if rid is None or not isinstance(src, AwsSource) or plan.instance is None:
        return None
    net = src.network
    return Need(
        reservation_id=rid,
        kind=src.capacity.kind,
        instance_type=plan.instance.name,
        instance_count=plan.spec.gpu_node_count,
        availability_zone=net.availability_zone if isinstance(net, NewNetwork) else None,
        subnet_id=None if isinstance(net, NewNetwork) else net.subnet_id,
    )


def describe(ec2: Any, rid: str) -> Reservation | None:
    from botocore.exceptions import ClientError

    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code", "").startswith("InvalidCapacityReservationId"):
            return None
        raise
    return Reservation.from_api(found[0]) if found else None


def subnet_zone(ec2: Any, subnet_id: str) -> str:
    return str(ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZone"])


def judge(n: Need, r: Reservation | None, now: datetime, zone: str, region: str | None) -> Reservation:
    """Refuse (CapacityRefused) unless ``r`` serves the need now; return it when it does."""
    rid = n.reservation_id
    if r is None:
        where = f" in {region}" if region else ""
        raise CapacityRefused(rid, f"does not exist{where} (check the id and aws:region)", "capacity-exists")
    is_block = r.reservation_type == "capacity-block"
    if (n.kind == "block") != is_block:
        want = "a Capacity Block" if n.kind == "block" else "an On-Demand Capacity Reservation"
        got = "a Capacity Block" if is_block else "an On-Demand Capacity Reservation"
        raise CapacityRefused(rid, f"capacity.kind {n.kind} needs {want}, but this is {got}", "capacity-kind")
    if r.availability_zone != zone:
        raise CapacityRefused(
            rid, f"is in {r.availability_zone}, but the stack's subnet is in {zone}", "capacity-zone"
        )
    if r.instance_type != n.instance_type:
        raise CapacityRefused(
            rid, f"holds {r.instance_type}, but the stack runs {n.instance_type}", "capacity-instance-type"
        )
    if r.total < n.instance_count:
        raise CapacityRefused(
            rid, f"holds {r.total} instances, but the stack needs {n.instance_count}", "capacity-count"
        )
    if r.state == "expired" or (r.state == "active" and r.usable_end is not None and r.usable_end <= now):
        ended = iso(r.end) if r.end else "an unknown date"
        raise CapacityRefused(rid, f"expired: it ended {ended}; buy another block", "capacity-expired")
    if r.state in NOT_YET:
        when = f"starts {iso(r.start)} (in {_span(r.start - now)})" if r.start else "has not started"
        raise NotStarted(
            rid,
            f"is {r.state}: {when}; run again then, or wait for it (`flashfleet up --wait`, "
            "or capacity.waitForStart: true)",
            r.start,
        )
    if r.state != "active":
        raise CapacityRefused(rid, f"is {r.state}, not active: nothing can launch into it", "capacity-state")
    return r


def _span(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    days, rest = divmod(minutes, 1440)
    return (f"{days}d " if days else "") + f"{rest // 60}h {rest % 60:02d}m"


def check(ec2: Any, plan: StackPlan, now: datetime) -> Reservation | None:
    """The live reservation the stack may launch into now (None: the stack needs none)."""
    n = need(plan)
    if n is None:
        return None
    if n.reservation_id == PLACEHOLDER_RESERVATION:
        what = (
            f"buy a block first: `flashfleet capacity offers {plan.stack}`, then "
            f"`flashfleet capacity buy {plan.stack} --offering ID`"
            if n.kind == "block"
            else "put the id of your On-Demand Capacity Reservation in the stack file"
        )
        raise CapacityRefused(
            n.reservation_id, f"is the placeholder in {FIELD}: {what}", "capacity-placeholder"
        )
    zone = n.availability_zone or subnet_zone(ec2, n.subnet_id or "")
    return judge(n, describe(ec2, n.reservation_id), now, zone, plan.region)


def check_or_wait(
    ec2: Any,
    plan: StackPlan,
    *,
    wait: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    say: Callable[[str], None] = print,
) -> Reservation | None:
    """``check``; when the reservation has not started and ``wait`` is set, sleep until it has."""
    # Not polling.poll: the pause is read from the reservation's start, and there is no timeout
    # (the user asked to wait for a block they bought; it starts at a known time).
    while True:
        try:
            return check(ec2, plan, clock())
        except NotStarted as err:
            if not wait:
                raise
            ahead = (err.start - clock()) if err.start else timedelta(0)
            pause = ahead if ahead > POLL else POLL  # to the start, then poll until it is active
            say(f"capacity reservation {err.reservation} {err.message.split(';')[0]}; waiting")
            sleep(pause.total_seconds())


def wait_requested(plan: StackPlan) -> bool:
    blk = block(plan.spec)
    return bool(blk and blk.wait_for_start)


def check_reservation_usable(
    plan: StackPlan,
    *,
    wait: bool | None = None,
    client: Callable[[str | None], Any] | None = None,
    say: Callable[[str], None] = print,
) -> Reservation | None:
    """The pre-flight check with the user's AWS settings: for ``pulumi up`` and ``flashfleet up``.

    ``wait`` None follows the stack's ``capacity.waitForStart``. AWS errors become CapacityRefused.
    """
    n = need(plan)
    if n is None:
        return None
    if n.reservation_id == PLACEHOLDER_RESERVATION:
        check(None, plan, datetime.now(UTC))  # refuses before any AWS call: no credentials needed
    from botocore.exceptions import BotoCoreError, ClientError

    from flashfleet.aws_client import NoAwsCredentials, ec2_client

    try:
        ec2 = (client or ec2_client)(plan.region)
        return check_or_wait(ec2, plan, wait=wait_requested(plan) if wait is None else wait, say=say)
    except (BotoCoreError, ClientError, NoAwsCredentials) as err:
        raise CapacityRefused(n.reservation_id, f"cannot be read from EC2: {err}", "capacity-aws") from None


def block_end(r: Reservation | None) -> datetime | None:
    """The end the nodes' deadline is bound by: a block's (AWS reclaims its instances)."""
    return r.end if r is not None and r.reservation_type == "capacity-block" else None
