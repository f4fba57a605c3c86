"""Capacity Block offerings (EC2 DescribeCapacityBlockOfferings) that fit a stack.

An offering is for a number of instances of one type (or of UltraServers) for a duration; EC2
quotes the whole block's upfront fee. flashfleet adds the price per GPU-hour so that offerings of
different sizes and lengths compare.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from flashfleet.stack.capacity_block import MAX_BLOCK, usable_until
from flashfleet.stack.errors import STACK_KEY

# EC2's rule for CapacityDurationHours: whole days up to 14 days, then whole weeks up to 182 days.
DAY, WEEK = 24, 168
MAX_HOURS = MAX_BLOCK // timedelta(hours=1)
MAX_LEAD = timedelta(weeks=8)  # a block starts at most 8 weeks ahead


class OfferError(ValueError):
    """Bad input to an offering search or purchase: one line, naming the option and the rule."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def check_hours(hours: int) -> int:
    if hours <= 0 or hours > MAX_HOURS or hours % DAY or (hours > 14 * DAY and hours % WEEK):
        raise OfferError(
            f"--hours {hours}: EC2 sells blocks in whole days (24..336 hours) and then whole weeks "
            f"up to {MAX_HOURS} hours",
            "block-duration",
        )
    return hours


@dataclass(frozen=True)
class Offer:
    offering_id: str
    instance_type: str
    instance_count: int
    availability_zone: str
    start: datetime
    end: datetime
    hours: float
    upfront_fee: float
    currency: str
    gpus_per_instance: int
    ultraserver_type: str | None = None
    ultraserver_count: int | None = None

    @property
    def gpu_hours(self) -> float:
        return self.instance_count * self.gpus_per_instance * self.hours

    @property
    def price_per_gpu_hour(self) -> float | None:
        return self.upfront_fee / self.gpu_hours if self.gpu_hours > 0 else None

    @property
    def price_per_instance_hour(self) -> float | None:
        n = self.instance_count * self.hours
        return self.upfront_fee / n if n > 0 else None

    def row(self) -> OfferRow:
        """The offering as `capacity offers --format json` lists it."""
        return OfferRow(
            offering_id=self.offering_id,
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            ultraserver_type=self.ultraserver_type,
            ultraserver_count=self.ultraserver_count,
            availability_zone=self.availability_zone,
            start=iso(self.start),
            end=iso(self.end),
            usable_until=iso(usable_until(self.end)),
            duration_hours=self.hours,
            upfront_fee=self.upfront_fee,
            currency=self.currency,
            price_per_gpu_hour=self.price_per_gpu_hour,
        )


class OfferRow(BaseModel):
    """One offering as listed: times in UTC, the nodes' end (``usable_until``) and the GPU-hour price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offering_id: str
    instance_type: str
    instance_count: int
    ultraserver_type: str | None
    ultraserver_count: int | None
    availability_zone: str
    start: str
    end: str
    usable_until: str
    duration_hours: int | float  # as given: no 24 -> 24.0 in the JSON
    upfront_fee: int | float
    currency: str
    price_per_gpu_hour: float | None


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_api(raw: dict[str, Any], gpus_per_instance: int) -> Offer:
    """One element of CapacityBlockOfferings as boto3 returns it (timestamps already datetimes)."""
    hours = raw.get("CapacityBlockDurationHours", 0) + raw.get("CapacityBlockDurationMinutes", 0) / 60
    return Offer(
        offering_id=raw["CapacityBlockOfferingId"],
        instance_type=raw["InstanceType"],
        instance_count=int(raw["InstanceCount"]),
        availability_zone=raw["AvailabilityZone"],
        start=raw["StartDate"],
        end=raw["EndDate"],
        hours=hours,
        upfront_fee=float(raw["UpfrontFee"]),  # a decimal string in the API
        currency=raw.get("CurrencyCode", "USD"),
        gpus_per_instance=gpus_per_instance,
        ultraserver_type=raw.get("UltraserverType"),
        ultraserver_count=raw.get("UltraserverCount"),
    )


@dataclass(frozen=True)
class OfferQuery:
    """What a stack asks EC2 for: its instance type (or UltraServer type) and count, for ``hours``."""

    instance_type: str
    instance_count: int
    hours: int
    start_after: datetime | None = None
    end_before: datetime | None = None
    ultraserver_type: str | None = None
    ultraserver_count: int | None = None

    def request(self) -> dict[str, Any]:
        """The DescribeCapacityBlockOfferings parameters: the UltraServer form when one is named."""
        params: dict[str, Any] = {"CapacityDurationHours": check_hours(self.hours)}
        if self.ultraserver_type:
            params["UltraserverType"] = self.ultraserver_type
            params["UltraserverCount"] = self.ultraserver_count or 1
        else:
            params["InstanceType"] = self.instance_type
            params["InstanceCount"] = self.instance_count
        if self.start_after is not None:
            params["StartDateRange"] = self.start_after
        if self.end_before is not None:
            params["EndDateRange"] = self.end_before
        return params


def describe(ec2: Any, query: OfferQuery) -> Iterator[dict[str, Any]]:
    """Every offering EC2 returns for the query, across pages."""
    params = query.request()
    while True:
        page = ec2.describe_capacity_block_offerings(**params)
        yield from page.get("CapacityBlockOfferings", [])
        token = page.get("NextToken")
        if not token:
            return
        params = {**params, "NextToken": token}


def mismatch(offer: Offer, query: OfferQuery, zone: str | None) -> OfferError | None:
    """Why ``offer`` is not the block the stack asked for, or None: exactly the stack's instance
    type and node count (a larger block is paid in full and cannot be cancelled), exactly the
    hours asked, the stack's zone when it is bound to one, and the window asked for."""
    where = f"--offering {offer.offering_id}"
    if offer.instance_type != query.instance_type:
        return OfferError(
            f"{where}: instance type {offer.instance_type}, but the stack's "
            f"{STACK_KEY}.nodes.source.instanceType is {query.instance_type}",
            "offering-instance-type",
        )
    if offer.instance_count != query.instance_count:
        return OfferError(
            f"{where}: {offer.instance_count} instances, but the stack's {STACK_KEY}.nodes.count "
            f"is {query.instance_count}",
            "offering-count",
        )
    if offer.hours != query.hours:
        return OfferError(f"{where}: {offer.hours:g} hours, but --hours is {query.hours}", "offering-hours")
    if zone is not None and offer.availability_zone != zone:
        return OfferError(
            f"{where}: in {offer.availability_zone}, but the stack's subnet is in {zone}", "offering-zone"
        )
    # the window asked for: EC2 filters the listing by it, but what is bought is checked here
    if query.start_after is not None and offer.start < query.start_after:
        return OfferError(
            f"{where}: starts {iso(offer.start)}, before --start-after {iso(query.start_after)}",
            "offering-window",
        )
    if query.end_before is not None and offer.end > query.end_before:
        return OfferError(
            f"{where}: ends {iso(offer.end)}, after --end-before {iso(query.end_before)}", "offering-window"
        )
    return None


def fitting(ec2: Any, query: OfferQuery, gpus_per_instance: int, zone: str | None = None) -> list[Offer]:
    """Offerings that match the stack (``mismatch``: what `buy` would take), cheapest per
    GPU-hour first, then earliest."""
    offers = [from_api(raw, gpus_per_instance) for raw in describe(ec2, query)]
    keep = [o for o in offers if mismatch(o, query, zone) is None]
    return sorted(keep, key=lambda o: (o.price_per_gpu_hour or 0.0, o.start, o.offering_id))
