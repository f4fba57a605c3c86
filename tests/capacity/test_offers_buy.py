"""`flashfleet capacity offers|buy` against the real boto3 EC2 client behind botocore's Stubber."""

from __future__ import annotations

import io
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from ec2_api import GB300, RID, client, offering, reservation

from flashfleet.bench.node_facts import from_bringup
from flashfleet.capacity.offers import OfferError, OfferQuery, check_hours, fitting, from_api
from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.plan_view import plan_data
from flashfleet.stack import DEFAULT_STACKS_DIR

START = (datetime.now(UTC) + timedelta(days=2)).replace(hour=11, minute=30, second=0, microsecond=0)
QUERY = {"CapacityDurationHours": 48, "InstanceType": GB300, "InstanceCount": 1}


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.gb300-lowlat.yaml", tmp_path)
    return tmp_path


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The stubbed client, handed to the CLI in place of boto3's default one."""
    ec2, stub = client()
    monkeypatch.setattr("flashfleet.aws_client.ec2_client", lambda region: ec2)
    with stub:
        yield stub
    stub.assert_no_pending_responses()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_offers_are_listed_across_pages_filtered_and_priced_per_gpu_hour() -> None:
    ec2, stub = client()
    big = offering("cbo-0000000000000000b", start=START, fee="9600.00", count=2)
    cheap = offering(
        "cbo-0000000000000000c", start=START + timedelta(days=1), fee="1920.00", zone="us-east-2b"
    )
    other_zone = offering("cbo-0000000000000000d", start=START, fee="2000.00", zone="us-east-2c")
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [big], "NextToken": "page-2"},
        {**QUERY, "StartDateRange": START},
    )
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [cheap, other_zone]},
        {**QUERY, "StartDateRange": START, "NextToken": "page-2"},
    )
    query = OfferQuery(GB300, 1, 48, start_after=START)
    with stub:
        offers = fitting(ec2, query, gpus_per_instance=4, zone=None)
    # The 2-instance block on page 1 is left out: a 1-node stack buys exactly 1 instance.
    assert [o.offering_id for o in offers] == [
        "cbo-0000000000000000c",  # 1920 / (1 x 4 GPUs x 48 h) = 10.00
        "cbo-0000000000000000d",  # 10.42
    ]
    assert offers[0].price_per_gpu_hour == pytest.approx(10.0)
    assert from_api(big, gpus_per_instance=4).price_per_gpu_hour == pytest.approx(25.0)  # 9600 / (2 x 4 x 48)
    # Bound to a zone (an existing subnet), only that zone's offerings fit.
    stub.add_response(
        "describe_capacity_block_offerings", {"CapacityBlockOfferings": [cheap, other_zone]}, QUERY
    )
    with stub:
        assert [o.offering_id for o in fitting(ec2, OfferQuery(GB300, 1, 48), 4, zone="us-east-2c")] == [
            "cbo-0000000000000000d"
        ]


def test_offers_too_small_for_the_stack_are_left_out() -> None:
    ec2, stub = client()
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [offering("cbo-00000000000000001", start=START, count=1)]},
        {**QUERY, "InstanceCount": 2},
    )
    with stub:
        assert fitting(ec2, OfferQuery(GB300, 2, 48), 4) == []


def test_the_ultraserver_form_asks_for_ultraservers_not_instances() -> None:
    query = OfferQuery(GB300, 1, 24, ultraserver_type="u-p6e-gb300x72", ultraserver_count=1)
    params = query.request()
    assert params == {"CapacityDurationHours": 24, "UltraserverType": "u-p6e-gb300x72", "UltraserverCount": 1}
    ec2, stub = client()
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []}, params)
    with stub:  # the botocore model of this version knows the UltraServer parameters
        assert fitting(ec2, query, 4) == []


@pytest.mark.parametrize("hours", [0, 12, 25, 360, 182 * 24 + 168])
def test_durations_ec2_does_not_sell_are_refused(hours: int) -> None:
    with pytest.raises(OfferError) as info:
        check_hours(hours)
    assert info.value.rule == "block-duration"


@pytest.mark.parametrize("hours", [24, 336, 504, 182 * 24])
def test_durations_ec2_sells(hours: int) -> None:
    assert check_hours(hours) == hours


def test_offers_cli_json(stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [offering("cbo-00000000000000001", start=START)]},
        QUERY,
    )
    code, out, _ = _cli(
        capsys,
        "capacity",
        "offers",
        "gb300-lowlat",
        "--hours",
        "48",
        "--stacks-dir",
        str(stacks),
        "--format",
        "json",
    )
    assert code == 0
    [offer] = json.loads(out)["offers"]
    assert offer["offering_id"] == "cbo-00000000000000001"
    assert offer["instance_type"] == GB300
    assert offer["instance_count"] == 1
    assert offer["availability_zone"] == "us-east-2a"
    assert offer["duration_hours"] == 48
    assert offer["upfront_fee"] == 2400.0
    assert offer["price_per_gpu_hour"] == pytest.approx(12.5)
    assert offer["end"] > offer["usable_until"] > offer["start"]


def test_offers_cli_text_lines_up_each_offer_under_the_header(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    later = START + timedelta(days=1)
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [
            offering("cbo-00000000000000001", start=START),
            offering("cbo-00000000000000002", start=later, fee="12000.00", zone="us-east-2b"),
        ]},
        QUERY,
    )  # fmt: skip
    code, out, _ = _cli(
        capsys, "capacity", "offers", "gb300-lowlat", "--hours", "48", "--stacks-dir", str(stacks)
    )
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("offering"))
    header, first, second = lines[head : head + 3]
    assert header.split() == ["offering", "type", "n", "hours", "start", "end", "zone", "upfront", "/GPU-h"]
    # each value in its own offer's row, under its column: text starts with its header, numbers end with it
    for row, oid, start, zone, fee, per in (
        (first, "cbo-00000000000000001", START, "us-east-2a", "2400.00 USD", "12.50"),
        (second, "cbo-00000000000000002", later, "us-east-2b", "12000.00 USD", "62.50"),
    ):
        assert row.startswith(oid)
        assert row.index(GB300) == header.index("type")
        assert row.index(start.strftime("%Y-%m-%dT%H:%M:%SZ")) == header.index("start")
        assert row.index(zone) == header.index("zone")
        assert row.index(fee) + len(fee) == header.index("upfront") + len("upfront")
        assert row.endswith(" " + per)
        assert len(row) == len(header)  # /GPU-h, the last column, ends with its header
    assert "flashfleet capacity buy gb300-lowlat --offering ID --hours 48" in lines[head + 3]


def test_offers_for_an_on_demand_stack_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "capacity", "offers", "h200-lowlat")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "capacity-block-stack" in err


def _buy(stacks: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return _cli(
        capsys,
        "capacity",
        "buy",
        "gb300-lowlat",
        "--offering",
        "cbo-00000000000000001",
        "--hours",
        "48",
        "--stacks-dir",
        str(stacks),
        *extra,
    )


def test_buy_refuses_above_max_price_checked_against_the_current_quote(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (stacks / "Pulumi.gb300-lowlat.yaml").read_text()
    # Listed at 2400 earlier; EC2 quotes 2600 now. No purchase response is queued: a call would fail.
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [offering("cbo-00000000000000001", start=START, fee="2600.00")]},
        QUERY,
    )
    code, _out, err = _buy(stacks, capsys, "--max-price", "2500", "--yes")
    assert code == 2
    assert err.strip().splitlines() == [
        "flashfleet capacity: --max-price 2500.00: cbo-00000000000000001 costs 2600.00 USD now; "
        "nothing bought [rule: max-price]"
    ]
    assert (stacks / "Pulumi.gb300-lowlat.yaml").read_text() == before


def test_buy_an_offering_no_longer_offered_is_refused(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []}, QUERY)
    code, _, err = _buy(stacks, capsys, "--max-price", "2500", "--yes")
    assert code == 2
    assert "[rule: offering-gone]" in err


def test_buy_without_a_terminal_needs_yes(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal: no silent purchase from a pipe
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [offering("cbo-00000000000000001", start=START)]},
        QUERY,
    )
    code, out, err = _buy(stacks, capsys, "--max-price", "2500")
    assert code == 2
    assert "[rule: confirm]" in err
    assert "cannot be cancelled" in out
    assert "`pulumi destroy` cannot remove it" in out


def test_buy_writes_the_block_into_the_stack_file_keeping_comments(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stacks / "Pulumi.gb300-lowlat.yaml"
    before = path.read_text()
    offer = offering("cbo-00000000000000001", start=START, zone="us-east-2b")
    ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]}, QUERY)
    ec2.add_response(
        "purchase_capacity_block",
        {"CapacityReservation": reservation(state="payment-pending", start=START, zone="us-east-2b")},
        {
            "CapacityBlockOfferingId": "cbo-00000000000000001",
            "InstancePlatform": "Linux/UNIX",
            "TagSpecifications": [
                {
                    "ResourceType": "capacity-reservation",
                    "Tags": [{"Key": "flashfleet:stack", "Value": "gb300-lowlat"}],
                }
            ],
        },
    )
    code, out, err = _buy(stacks, capsys, "--max-price", "2500", "--yes")
    assert code == 0, err
    assert "cannot be cancelled" in out
    assert f"bought {RID}" in out
    text = path.read_text()
    # Every comment line of the file survives the edit.
    kept = [ln.strip() for ln in before.splitlines() if ln.strip().startswith("#")]
    assert all(c in text for c in kept)
    assert "# the node ends itself 30 min before the block ends" in text
    assert "cr-00000000000000000" not in text
    [id_line] = [ln for ln in text.splitlines() if "reservationId:" in ln]
    assert "placeholder" not in id_line
    assert "flashfleet capacity buy" in id_line
    spec = yaml.safe_load(text)["config"]["flashfleet:stack"]
    cap = spec["nodes"]["source"]["capacity"]
    assert cap["reservationId"] == RID
    assert spec["nodes"]["source"]["network"]["availabilityZone"] == "us-east-2b"  # moved to the block
    bought = cap["purchased"]
    assert bought["availabilityZone"] == "us-east-2b"
    assert bought["instanceCount"] == 1
    assert bought["upfrontPriceUsd"] == 2400.0
    assert "cbo-00000000000000001" in bought["priceSource"]
    assert RID in bought["priceSource"]
    # The file still validates, and the block's price is now the stack's sourced price.
    b = load_stack("gb300-lowlat", stacks)
    assert not b.needs_capacity_purchase
    assert b.hourly_cost_usd == pytest.approx(2400 / 48)
    assert b.price_source is not None
    assert b.price_source.startswith("Capacity Block purchase: EC2 PurchaseCapacityBlock")
    # ... and what a benchmark's cost figures are computed from.
    assert from_bringup(b).hourly_usd_per_node == pytest.approx(2400 / 48)
    plan = plan_data(b)
    assert plan.capacity is not None
    assert plan.capacity.window is not None
    assert plan.capacity.window.end == bought["end"]
    assert plan.capacity.window.nodes_until < bought["end"]
    assert not any("capacity" in w for w in plan.warnings)


def test_a_second_buy_while_the_block_lasts_is_refused(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    offer = offering("cbo-00000000000000001", start=START)
    ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]}, QUERY)
    ec2.add_response(
        "purchase_capacity_block", {"CapacityReservation": reservation(state="payment-pending", start=START)}
    )
    assert _buy(stacks, capsys, "--max-price", "2500", "--yes")[0] == 0
    code, _, err = _buy(stacks, capsys, "--max-price", "2500", "--yes")
    assert code == 2
    assert "[rule: block-held]" in err
    assert RID in err


def test_a_full_disk_after_a_paid_buy_keeps_the_stack_file_and_prints_the_record(
    stacks: Path,
    ec2: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    runs_dir: Path,
) -> None:
    """The block is bought and cannot be cancelled: a disk that fills while the stack file is
    written leaves the file as it was (not cut at 4096 bytes), and the purchase's record is
    printed, to be pasted in, with one line saying so (exit 1, no traceback)."""
    from tests.cli.test_interrupt_and_full_disk import full_disk_below

    path = stacks / "Pulumi.gb300-lowlat.yaml"
    before = path.read_text()
    offer = offering("cbo-00000000000000001", start=START, zone="us-east-2b")
    ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]}, QUERY)
    ec2.add_response(
        "purchase_capacity_block",
        {"CapacityReservation": reservation(state="payment-pending", start=START, zone="us-east-2b")},
    )
    real_open = io.open
    monkeypatch.setattr(io, "open", full_disk_below(stacks, real_open))
    code, out, err = _buy(stacks, capsys, "--max-price", "2500", "--yes")
    monkeypatch.setattr(io, "open", real_open)
    assert code == 1, err
    assert path.read_text() == before
    assert sorted(p.name for p in stacks.iterdir()) == [path.name]
    [line] = err.strip().splitlines()
    assert f"{path}: not written (No space left on device)" in line
    assert "the block IS bought" in line
    [kept] = (runs_dir / "gb300-lowlat" / "capacity").iterdir()  # the purchase's own record is whole
    assert f"its record is in {kept}" in line
    record = yaml.safe_load(out[out.index("capacity:") :])
    assert record["capacity"]["reservationId"] == RID
    assert record["capacity"]["purchased"]["availabilityZone"] == "us-east-2b"
    assert record["capacity"]["purchased"]["upfrontPriceUsd"] == 2400.0


@pytest.mark.parametrize("bound", ["--start-after", "--end-before"])
def test_buy_refuses_an_offering_outside_the_window_asked(
    stacks: Path, ec2: Any, capsys: pytest.CaptureFixture[str], bound: str
) -> None:
    """The finding: a block starting three days outside --start-after was bought. EC2 filters
    its listing by the window, but what is bought is checked against it too. No purchase
    response is queued: a purchase call would fail the test."""
    before = (stacks / "Pulumi.gb300-lowlat.yaml").read_text()
    if bound == "--start-after":
        moment = START + timedelta(days=3)  # the offering starts three days before it
        params = {**QUERY, "StartDateRange": moment}
    else:
        moment = START + timedelta(hours=48) - timedelta(days=3)  # it ends three days after it
        params = {**QUERY, "EndDateRange": moment}
    offer = offering("cbo-00000000000000001", start=START)
    ec2.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]}, params)
    code, _out, err = _buy(stacks, capsys, "--max-price", "2500", "--yes", bound, moment.isoformat())
    assert code == 2, err
    assert "[rule: offering-window]" in err
    assert bound in err
    assert (stacks / "Pulumi.gb300-lowlat.yaml").read_text() == before
