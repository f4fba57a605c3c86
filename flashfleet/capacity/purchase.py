"""Buy a Capacity Block (EC2 PurchaseCapacityBlock) and record it in the stack file.

A block cannot be cancelled and ``pulumi destroy`` cannot remove it, so nothing here runs
implicitly: the CLI asks first, and the price is read again from EC2 right before buying.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap

from flashfleet.capacity.offers import Offer, OfferError, OfferQuery, describe, from_api, iso
from flashfleet.catalog.instances import instance_catalog
from flashfleet.components.tags import STACK_TAG
from flashfleet.stack.errors import STACK_KEY
from flashfleet.yaml_edit import child_mapping, edit_yaml

PLATFORM = "Linux/UNIX"  # the Deep Learning AMIs
CURRENCY = "USD"  # --max-price and the catalog's prices are in US dollars
# Without --max-price a quote may exceed the catalog's listed fee by this much: AWS updates block
# rates with supply and demand, so the listing is a reference, not the price of the day.
LISTED_TOLERANCE = 0.10


@dataclass(frozen=True)
class Ceiling:
    """The most a purchase may cost, in USD, and where that bound comes from."""

    usd: float
    field: str  # what a refusal names: --max-price, or the listed price
    basis: str  # the bound in words, for the refusal
    rule: str


def ceiling(query: OfferQuery, max_price: float | None) -> Ceiling:
    """--max-price when given; else the catalog's listed fee for this many instances and hours
    plus LISTED_TOLERANCE. No listed price and no --max-price: refused (a purchase needs a bound)."""
    if max_price is not None:
        return Ceiling(max_price, f"--max-price {max_price:.2f}", "", "max-price")
    listed = instance_catalog().get(query.instance_type)
    rate = listed.block_price_usd_per_hour if listed else None
    if listed is None or rate is None:
        raise OfferError(
            f"--max-price: required: the catalog lists no Capacity Block price for {query.instance_type}, "
            "and a purchase needs a ceiling; nothing bought",
            "max-price-required",
        )
    n, hours = query.instance_count, query.hours
    fee = rate * n * hours
    basis = (
        f"the listed {fee:.2f} USD ({rate:g} USD per instance-hour x {n} x {hours} h, "
        f"{listed.block_price_source}, {listed.block_price_date}) by more than {LISTED_TOLERANCE:.0%}"
    )
    return Ceiling(fee * (1 + LISTED_TOLERANCE), "listed price", basis, "listed-price")


@dataclass(frozen=True)
class Purchase:
    reservation_id: str
    availability_zone: str
    instance_type: str
    instance_count: int
    start: datetime
    end: datetime
    state: str
    offer: Offer
    bought_at: datetime

    @property
    def price_source(self) -> str:
        o = self.offer
        return (
            f"EC2 PurchaseCapacityBlock {o.offering_id} -> {self.reservation_id}: {o.upfront_fee:.2f} "
            f"{o.currency} upfront for {o.instance_count} x {o.instance_type}, {o.hours:g} h, "
            f"bought {iso(self.bought_at)}"
        )


def current_offer(ec2: Any, query: OfferQuery, offering_id: str, gpus_per_instance: int) -> Offer:
    """The offering as EC2 quotes it now (offerings and their prices change; an id goes stale)."""
    for raw in describe(ec2, query):
        if raw.get("CapacityBlockOfferingId") != offering_id:
            continue
        segments = raw.get("CapacityBlockOfferingSegments") or []
        if len(segments) > 1:
            raise OfferError(
                f"--offering {offering_id}: made of {len(segments)} segments, each its own reservation; "
                "a flashfleet stack targets one reservation",
                "block-segments",
            )
        return from_api(raw, gpus_per_instance)
    raise OfferError(
        f"--offering {offering_id}: not offered now for {query.instance_count} x {query.instance_type}, "
        f"{query.hours} h (offerings change: run `flashfleet capacity offers` again with the same "
        "--hours/--start-after)",
        "offering-gone",
    )


def check_price(offer: Offer, bound: Ceiling) -> None:
    """Refuse a quote in another currency, or above the ceiling."""
    if offer.currency != CURRENCY:
        raise OfferError(
            f"--offering {offer.offering_id}: quoted in {offer.currency}, but prices here are in "
            f"{CURRENCY}; nothing bought",
            "offering-currency",
        )
    if not offer.upfront_fee <= bound.usd:  # also refuses a fee that is not a number
        above = f", above {bound.basis}" if bound.basis else ""
        raise OfferError(
            f"{bound.field}: {offer.offering_id} costs {offer.upfront_fee:.2f} {CURRENCY} now{above}; "
            "nothing bought",
            bound.rule,
        )


def buy(ec2: Any, offer: Offer, stack: str, now: datetime) -> Purchase:
    """Purchase the offering, tagged with the stack. Irreversible: call only after confirmation."""
    answer = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer.offering_id,
        InstancePlatform=PLATFORM,
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": STACK_TAG, "Value": stack}]}
        ],
    )
    cr = answer["CapacityReservation"]
    return Purchase(
        reservation_id=cr["CapacityReservationId"],
        availability_zone=cr.get("AvailabilityZone", offer.availability_zone),
        instance_type=cr.get("InstanceType", offer.instance_type),
        instance_count=int(cr.get("TotalInstanceCount", offer.instance_count)),
        start=cr.get("StartDate", offer.start),
        end=cr.get("EndDate", offer.end),
        state=cr.get("State", "payment-pending"),
        offer=offer,
        bought_at=now,
    )


def record(path: Path, purchase: Purchase) -> None:
    """Write the block into the stack file: its id, availability zone and window, and its price
    with the source; the new network moves to the block's zone. Comments and layout are kept."""

    def store(doc: CommentedMap) -> None:
        spec = child_mapping(child_mapping(doc, "config", path.name), STACK_KEY, path.name)
        source = child_mapping(child_mapping(spec, "nodes", path.name), "source", path.name)
        capacity = child_mapping(source, "capacity", path.name)
        capacity["kind"] = "block"
        capacity["reservationId"] = purchase.reservation_id
        if "reservationId" in capacity.ca.items:  # the placeholder's comment no longer applies
            capacity.yaml_add_eol_comment("bought with `flashfleet capacity buy`", "reservationId")
        bought = CommentedMap()
        bought["offeringId"] = purchase.offer.offering_id
        bought["availabilityZone"] = purchase.availability_zone
        bought["instanceCount"] = purchase.instance_count
        bought["start"] = iso(purchase.start)
        bought["end"] = iso(purchase.end)
        bought["upfrontPriceUsd"] = round(purchase.offer.upfront_fee, 2)
        bought["priceSource"] = purchase.price_source
        capacity["purchased"] = bought  # the same fields record_text prints
        capacity.yaml_add_eol_comment(
            "written by `flashfleet capacity buy`; cannot be cancelled", "purchased"
        )
        network = source.get("network")
        if isinstance(network, CommentedMap) and network.get("kind") == "new":
            network["availabilityZone"] = purchase.availability_zone

    edit_yaml(path, store)


def capacity_section(purchase: Purchase) -> dict[str, Any]:
    """The block's `capacity` section as `record` writes it into the stack file."""
    return {
        "capacity": {
            "kind": "block",
            "reservationId": purchase.reservation_id,
            "purchased": {
                "offeringId": purchase.offer.offering_id,
                "availabilityZone": purchase.availability_zone,
                "instanceCount": purchase.instance_count,
                "start": iso(purchase.start),
                "end": iso(purchase.end),
                "upfrontPriceUsd": round(purchase.offer.upfront_fee, 2),
                "priceSource": purchase.price_source,
            },
        }
    }


def record_text(purchase: Purchase) -> str:
    """The block's `capacity` section as YAML text: what the user pastes into the stack file when
    it could not be written (a full disk), so a paid block is never lost."""
    import io

    from ruamel.yaml import YAML

    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(capacity_section(purchase), out)
    return out.getvalue()
