"""`capacity buy --yes` buys only the block the stack and the request ask for.

Each refusal comes from a quote that was bought before: a fee 10 times the listed price, a fee in
another currency, a 4-instance block for a 1-node stack, a 336 h block for `--hours 48`. The
client is the real boto3 one behind botocore's Stubber; every operation it is asked for is
recorded, so a refusal proves that PurchaseCapacityBlock was never called.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ec2_api import GB300, RID, client, offering, reservation

from flashfleet.catalog.instances import instance_catalog
from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR

START = (datetime.now(UTC) + timedelta(days=2)).replace(hour=11, minute=30, second=0, microsecond=0)
QUERY = {"CapacityDurationHours": 48, "InstanceType": GB300, "InstanceCount": 1}
OID = "cbo-00000000000000001"
STACK_FILE = "Pulumi.gb300-lowlat.yaml"
LISTED_RATE = 50.0  # USD per instance-hour: 1 x 48 h lists at 2400.00


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copy(DEFAULT_STACKS_DIR / STACK_FILE, tmp_path)
    return tmp_path


class Calls:
    """The stubbed client and the EC2 operations the CLI asked it for, in order."""

    def __init__(self, stub: Any, ops: list[str]) -> None:
        self.stub, self.ops = stub, ops


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    ec2, stub = client()
    ops: list[str] = []
    ec2.meta.events.register(
        "provide-client-params.ec2.*", lambda event_name, **_: ops.append(event_name.rsplit(".", 1)[1])
    )
    monkeypatch.setattr("flashfleet.aws_client.ec2_client", lambda region: ec2)
    with stub:
        yield Calls(stub, ops)


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog that lists a Capacity Block rate for GB300 (the shipped one lists none)."""
    real = instance_catalog()
    priced = dataclasses.replace(
        real[GB300],
        block_price_usd_per_hour=LISTED_RATE,
        block_price_source="test listing",
        block_price_date="2026-11-30",
    )
    monkeypatch.setattr("flashfleet.capacity.purchase.instance_catalog", lambda: {**real, GB300: priced})


def _buy(stacks: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = ["capacity", "buy", "gb300-lowlat", "--offering", OID, "--hours", "48"]
    code = main([*argv, "--stacks-dir", str(stacks), "--yes", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _quote(ec2: Calls, **kw: Any) -> None:
    ec2.stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [offering(OID, start=START, **kw)]},
        QUERY,
    )


def _refused(stacks: Path, ec2: Calls, err: str, code: int) -> str:
    """Exit 2, one line, the stack file untouched and no purchase asked for."""
    assert code == 2
    [line] = err.strip().splitlines()
    assert ec2.ops == ["DescribeCapacityBlockOfferings"]
    assert (stacks / STACK_FILE).read_text() == (DEFAULT_STACKS_DIR / STACK_FILE).read_text()
    return line


def _purchase(ec2: Calls) -> None:
    ec2.stub.add_response(
        "purchase_capacity_block",
        {"CapacityReservation": reservation(state="payment-pending", start=START)},
    )


def test_a_quote_ten_times_the_listed_price_is_refused(
    stacks: Path, ec2: Calls, listed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _quote(ec2, fee="24000.00")
    code, _, err = _buy(stacks, capsys)
    line = _refused(stacks, ec2, err, code)
    assert line.startswith(
        f"flashfleet capacity: listed price: {OID} costs 24000.00 USD now, above the listed 2400.00 USD"
    )
    assert "50 USD per instance-hour x 1 x 48 h" in line
    assert "by more than 10%" in line
    assert line.endswith("[rule: listed-price]")


@pytest.mark.parametrize(("fee", "bought"), [("2640.00", True), ("2640.01", False)])
def test_without_max_price_the_listed_price_plus_ten_percent_is_the_ceiling(
    stacks: Path, ec2: Calls, listed: None, capsys: pytest.CaptureFixture[str], fee: str, bought: bool
) -> None:
    _quote(ec2, fee=fee)
    if bought:
        _purchase(ec2)
    code, out, err = _buy(stacks, capsys)
    if bought:
        assert code == 0, err
        assert ec2.ops == ["DescribeCapacityBlockOfferings", "PurchaseCapacityBlock"]
        assert f"bought {RID}" in out
    else:
        assert "[rule: listed-price]" in _refused(stacks, ec2, err, code)


def test_no_listed_price_and_no_max_price_is_refused_before_asking_ec2(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    assert instance_catalog()[GB300].block_price_usd_per_hour is None  # the shipped catalog
    code, _, err = _buy(stacks, capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "flashfleet capacity: --max-price: required: the catalog lists no Capacity Block price for "
        f"{GB300}, and a purchase needs a ceiling; nothing bought [rule: max-price-required]"
    ]
    assert ec2.ops == []


def test_a_quote_in_another_currency_is_refused(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    ec2.stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [{**offering(OID, start=START, fee="2400.00"), "CurrencyCode": "EUR"}]},
        QUERY,
    )
    code, _, err = _buy(stacks, capsys, "--max-price", "2500")
    assert _refused(stacks, ec2, err, code) == (
        f"flashfleet capacity: --offering {OID}: quoted in EUR, but prices here are in USD; "
        "nothing bought [rule: offering-currency]"
    )


def test_a_four_instance_block_for_a_one_node_stack_is_refused(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    _quote(ec2, count=4, fee="9600.00")
    code, _, err = _buy(stacks, capsys, "--max-price", "10000")
    assert _refused(stacks, ec2, err, code) == (
        f"flashfleet capacity: --offering {OID}: 4 instances, but the stack's "
        "flashfleet:stack.nodes.count is 1 [rule: offering-count]"
    )


def test_a_336_hour_block_for_hours_48_is_refused(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    _quote(ec2, hours=336, fee="2400.00")
    code, _, err = _buy(stacks, capsys, "--max-price", "2500")
    assert _refused(stacks, ec2, err, code) == (
        f"flashfleet capacity: --offering {OID}: 336 hours, but --hours is 48 [rule: offering-hours]"
    )


def test_another_instance_type_is_refused(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    _quote(ec2, itype="p5en.48xlarge")
    code, _, err = _buy(stacks, capsys, "--max-price", "2500")
    assert _refused(stacks, ec2, err, code) == (
        f"flashfleet capacity: --offering {OID}: instance type p5en.48xlarge, but the stack's "
        f"flashfleet:stack.nodes.source.instanceType is {GB300} [rule: offering-instance-type]"
    )


def test_a_matching_offer_is_bought(stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]) -> None:
    _quote(ec2, fee="2400.00")
    _purchase(ec2)
    code, out, err = _buy(stacks, capsys, "--max-price", "2400")
    assert code == 0, err
    assert ec2.ops == ["DescribeCapacityBlockOfferings", "PurchaseCapacityBlock"]
    assert f"bought {RID}" in out
    assert RID in (stacks / STACK_FILE).read_text()


def test_an_offer_outside_the_existing_subnets_zone_is_refused(
    stacks: Path, ec2: Calls, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stacks / STACK_FILE
    new_net = "          kind: new               # a VPC + public subnet in the block's availability zone\n"
    text = path.read_text()
    assert new_net in text
    pinned = text.replace(
        new_net,
        "          kind: existing\n          vpcId: vpc-0123456789abcdef0\n"
        "          subnetId: subnet-0123456789abcdef0\n",
    ).replace("          availabilityZone: us-east-2a\n", "")
    path.write_text(pinned)
    ec2.stub.add_response(
        "describe_subnets",
        {"Subnets": [{"SubnetId": "subnet-0123456789abcdef0", "AvailabilityZone": "us-east-2a"}]},
        {"SubnetIds": ["subnet-0123456789abcdef0"]},
    )
    _quote(ec2, zone="us-east-2b")
    code, _, err = _buy(stacks, capsys, "--max-price", "2500")
    assert code == 2
    assert err.strip().splitlines() == [
        f"flashfleet capacity: --offering {OID}: in us-east-2b, but the stack's subnet is in us-east-2a "
        "[rule: offering-zone]"
    ]
    assert ec2.ops == ["DescribeSubnets", "DescribeCapacityBlockOfferings"]
    assert path.read_text() == pinned
