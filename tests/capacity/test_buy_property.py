"""Property: every Capacity Block request (--hours, --max-price, the stack's nodes.count) given
to `capacity buy --yes` is either refused with exit 2 and one line naming that field and its rule,
before anything is bought, or reaches EC2 as the same typed value: CapacityDurationHours and
InstanceCount as the integers asked, and a purchase only when the quote is within --max-price.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from botocore.stub import Stubber
from ec2_api import GB300, client, offering, reservation
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import budget

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR

START = (datetime.now(UTC) + timedelta(days=2)).replace(hour=11, minute=30, second=0, microsecond=0)
OID = "cbo-00000000000000001"
FEE = 2400.0  # EC2's quote for whatever was asked
ORIGINAL = (DEFAULT_STACKS_DIR / "Pulumi.gb300-lowlat.yaml").read_text()
assert "      count: 1\n" in ORIGINAL

_TYPED = st.sampled_from(
    ["48", "048", " 48 ", "24", "336", "504", "25", "0", "-24", "4_8", "48.0", "1e2", "nan", "inf",
     "", " ", "0x30", "+48", "\u0664\u0668", "48\n", "2400", "2399.99", "2400.01", "1e400", "-1",
     "2_400", "1e4", "0.0001", "-0", "Infinity"]
)  # fmt: skip
# Each strategy also draws values EC2 takes, so that the typed path is walked, not only refusals.
# The durations EC2 sells (its Capacity Blocks guide): 1 to 14 days in days, then weeks up to 182 days.
SOLD_HOURS = [24 * d for d in range(1, 15)] + [168 * w for w in range(3, 27)]
assert SOLD_HOURS[-1] == 182 * 24
HOURS = st.one_of(
    st.sampled_from(SOLD_HOURS).map(str), _TYPED, st.integers(-100, 5000).map(str), st.text(max_size=6)
)
PRICES = st.one_of(
    st.none(),
    st.floats(2000, 1e7).map(repr),
    _TYPED,
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=6),
)
COUNTS = st.one_of(st.integers(1, 64), st.integers(-2, 70), st.sampled_from([0, 1, 64, 65]))


def _hours(text: str) -> tuple[int | None, tuple[str, str]]:
    """What --hours should become, or the (field, rule) a refusal names."""
    field = ("--hours", "block-duration")
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or int(t) not in SOLD_HOURS:
        return None, field
    return int(t), field


def _price(text: str | None) -> tuple[float | None, tuple[str, str]]:
    if text is None:  # the shipped catalog lists no GB300 block price: a ceiling is required
        return None, ("--max-price", "max-price-required")
    try:
        value = float(text) if "_" not in text else math.nan
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and value > 0
    return (value if ok else None), ("--max-price", "max-price")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


# One client for every example, each with its own Stubber and an emptied call log: building an
# EC2 client (some 800 operations) cost more than the rest of an example.
EC2, _ = client()
CALLS: list[tuple[str, dict[str, Any]]] = []
EC2.meta.events.register(
    "provide-client-params.ec2.*",
    lambda params, event_name, **_: CALLS.append((event_name.rsplit(".", 1)[1], dict(params))),
)


# The cases found by hand, always run: bought as asked, and each field refused.
@example(hours="48", price="2400", count=1)
@example(hours="336", price="1e4", count=4)
@example(hours="48", price="2399.99", count=1)
@example(hours="48", price=None, count=1)
@example(hours="4_8", price="2400", count=1)
@example(hours="25", price="2400", count=1)
@example(hours="360", price="2400", count=1)  # 15 days: past 14 days only whole weeks
@example(hours="4368", price="2400", count=1)  # 26 weeks, the longest block
@example(hours="4536", price="2400", count=1)  # 27 weeks
@example(hours="48", price="nan", count=1)
@example(hours="48", price="inf", count=1)
@example(hours="48", price="2400", count=0)
@example(hours="48", price="2400", count=65)
@settings(max_examples=budget(120), deadline=None)
@given(hours=HOURS, price=PRICES, count=COUNTS)
def test_a_request_is_refused_naming_its_field_or_reaches_ec2_as_typed(
    hours: str, price: str | None, count: int
) -> None:
    file = ORIGINAL.replace("      count: 1\n", f"      count: {count}\n", 1)
    want_hours, hours_field = _hours(hours)
    want_price, price_field = _price(price)
    count_ok = 1 <= count <= 64
    ec2, stub = EC2, Stubber(EC2)
    calls = CALLS
    calls.clear()
    if want_hours is not None and count_ok:
        quote = offering(OID, start=START, hours=want_hours, count=count, fee=f"{FEE:.2f}")
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": [quote]},
            {"CapacityDurationHours": want_hours, "InstanceType": GB300, "InstanceCount": count},
        )
        stub.add_response(
            "purchase_capacity_block",
            {
                "CapacityReservation": reservation(
                    state="payment-pending", start=START, hours=want_hours, count=count
                )
            },
        )
    with tempfile.TemporaryDirectory() as tmp:
        stacks = Path(tmp)
        stack = stacks / "Pulumi.gb300-lowlat.yaml"
        stack.write_text(file)
        argv = ["capacity", "buy", "gb300-lowlat", "--offering", OID, f"--hours={hours}"]
        argv += [] if price is None else [f"--max-price={price}"]
        with mock.patch("flashfleet.aws_client.ec2_client", return_value=ec2), stub:
            code, _, err = _run([*argv, "--stacks-dir", tmp, "--yes"])
        bought = [p for op, p in calls if op == "PurchaseCapacityBlock"]
        if code == 0:
            # Everything valid, and the quote within the ceiling: EC2 saw the typed values.
            assert want_hours is not None
            assert want_price is not None
            assert count_ok
            assert want_price >= FEE
            [(op, asked), _] = calls
            assert op == "DescribeCapacityBlockOfferings"
            assert asked["CapacityDurationHours"] == want_hours
            assert type(asked["CapacityDurationHours"]) is int
            assert asked["InstanceCount"] == count
            assert type(asked["InstanceCount"]) is int
            [purchase] = bought
            assert purchase["CapacityBlockOfferingId"] == OID
            return
        assert code == 2, err
        assert bought == []
        assert stack.read_text() == file
        [line] = err.strip().splitlines()
        named = []
        if want_hours is None:
            named.append(hours_field)
        if want_price is None or want_price < FEE:
            named.append(price_field)
        if not count_ok:
            bound = "range"  # nodes.count below 1 or above 64
            named.append(("flashfleet:stack.nodes.count", bound))
        assert named, f"refused a valid request: {line}"
        assert any(field in line and f"[rule: {rule}" in line for field, rule in named), (line, named)
        assert line.startswith("flashfleet capacity: ")
