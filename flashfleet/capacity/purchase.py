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
from flashfleet.components.tags import STACK_TAG
from flashfleet.stack.errors import STACK_KEY
from flashfleet.yaml_edit import child_mapping, edit_yaml

PLATFORM = "Linux/UNIX"  # the Deep Learning AMIs


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


def check_price(offer: Offer, max_price: float | None) -> None:
    if max_price is None:
        return
    if offer.currency != "USD":
        raise OfferError(
            f"--max-price is in USD but {offer.offering_id} is quoted in {offer.currency}", "max-price"
        )
    if offer.upfront_fee > max_price:
        raise OfferError(
            f"--max-price {max_price:.2f}: {offer.offering_id} costs {offer.upfront_fee:.2f} USD now; "
            "nothing bought",
            "max-price",
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
        capacity["purchased"] = bought
        capacity.yaml_add_eol_comment(
            "written by `flashfleet capacity buy`; cannot be cancelled", "purchased"
        )
        network = source.get("network")
        if isinstance(network, CommentedMap) and network.get("kind") == "new":
            network["availabilityZone"] = purchase.availability_zone

    edit_yaml(path, store)
