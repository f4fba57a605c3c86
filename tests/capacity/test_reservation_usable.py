"""The pre-flight check: `pulumi up` (the real `__main__.py` under Pulumi's mocks) and
`flashfleet up` refuse a stack whose reservation is not usable now, before any resource exists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
import pytest
import yaml
from botocore.stub import Stubber
from ec2_api import GB300, NOW, RID, client, reservation
from pulumi_harness import Recorder
from test_pulumi_main import catalog_spec, run_main

from flashfleet.capacity import reservation as usable
from flashfleet.cli import main
from flashfleet.planning import load_stack, parse_spec, resolve_spec
from flashfleet.stack import DEFAULT_STACKS_DIR

LIVE = datetime.now(UTC)


def block_spec(rid: str = RID) -> dict[str, Any]:
    spec = catalog_spec("gb300-lowlat")
    spec["nodes"]["source"]["capacity"] = {"kind": "block", "reservationId": rid}
    return spec


def odcr_spec(rid: str = RID) -> dict[str, Any]:
    spec = catalog_spec("h200-lowlat")
    spec["nodes"]["source"]["capacity"] = {"kind": "reservation", "reservationId": rid}
    return spec


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    ec2, stub = client()
    monkeypatch.setattr("flashfleet.aws_client.ec2_client", lambda region: ec2)
    with stub:
        yield stub
    stub.assert_no_pending_responses()


def describe(stub: Stubber, answer: dict[str, Any]) -> None:
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [answer]},
        {"CapacityReservationIds": [RID]},
    )


def refused(stack: str, spec: dict[str, Any]) -> str:
    """`pulumi up`'s program refuses with one line and registers nothing; returns the line."""
    mocks = Recorder()
    with pytest.raises(pulumi.RunError) as info:
        run_main(stack, spec, mocks=mocks)
    assert mocks.resources == [], "nothing may be created before the capacity check passes"
    line = str(info.value)
    assert "\n" not in line
    return line


def test_placeholder_is_an_error_before_any_resource_and_any_aws_call(ec2: Stubber) -> None:
    # No response queued: a call to EC2 would fail the test.
    line = refused("gb300-lowlat", catalog_spec("gb300-lowlat"))
    assert line.startswith("capacity reservation cr-00000000000000000: is the placeholder")
    assert "flashfleet capacity buy gb300-lowlat" in line
    assert line.endswith("[rule: capacity-placeholder]")


def test_scheduled_block_says_when_it_starts(ec2: Stubber) -> None:
    start = (LIVE + timedelta(hours=5)).replace(microsecond=0)
    describe(ec2, reservation(state="scheduled", start=start))
    line = refused("gb300-lowlat", block_spec())
    assert line.startswith(f"capacity reservation {RID}: is scheduled: starts {start:%Y-%m-%dT%H:%M:%SZ}")
    assert "--wait" in line
    assert line.endswith("[rule: capacity-scheduled]")


def test_expired_block_is_refused_with_its_date(ec2: Stubber) -> None:
    start = datetime(2026, 11, 1, 11, 30, tzinfo=UTC)
    describe(ec2, reservation(state="expired", start=start, hours=48))
    line = refused("gb300-lowlat", block_spec())
    assert "expired: it ended 2026-11-03T11:30:00Z" in line
    assert line.endswith("[rule: capacity-expired]")


def test_active_block_inside_its_last_30_minutes_counts_as_expired(ec2: Stubber) -> None:
    # AWS starts terminating block instances 30 min before the end: too late to start nodes.
    describe(
        ec2, reservation(state="active", start=LIVE - timedelta(hours=48) + timedelta(minutes=20), hours=48)
    )
    assert refused("gb300-lowlat", block_spec()).endswith("[rule: capacity-expired]")


def test_block_in_another_zone_is_refused(ec2: Stubber) -> None:
    describe(ec2, reservation(zone="us-east-2c"))
    line = refused("gb300-lowlat", block_spec())
    assert line == (
        f"capacity reservation {RID}: is in us-east-2c, but the stack's subnet is in us-east-2a "
        "[rule: capacity-zone]"
    )


def test_block_of_another_instance_type_is_refused(ec2: Stubber) -> None:
    describe(ec2, reservation(itype="p5en.48xlarge"))
    line = refused("gb300-lowlat", block_spec())
    assert line == (
        f"capacity reservation {RID}: holds p5en.48xlarge, but the stack runs {GB300} "
        "[rule: capacity-instance-type]"
    )


def test_block_too_small_is_refused(ec2: Stubber) -> None:
    spec = block_spec()
    spec["nodes"]["count"] = 2
    spec["options"] = {}
    describe(ec2, reservation(count=1))
    assert refused("gb300-lowlat", spec).endswith("[rule: capacity-count]")


def test_missing_reservation_is_refused(ec2: Stubber) -> None:
    ec2.add_client_error(
        "describe_capacity_reservations",
        service_error_code="InvalidCapacityReservationId.NotFound",
        service_message=f"The capacity reservation ID '{RID}' does not exist",
        expected_params={"CapacityReservationIds": [RID]},
    )
    line = refused("gb300-lowlat", block_spec())
    assert (
        line
        == f"capacity reservation {RID}: does not exist in us-east-2 (check the id and aws:region) [rule: capacity-exists]"
    )


def test_an_odcr_named_as_a_block_is_refused(ec2: Stubber) -> None:
    describe(ec2, reservation(kind="default"))
    assert refused("gb300-lowlat", block_spec()).endswith("[rule: capacity-kind]")


def test_on_demand_reservation_gets_the_same_check(ec2: Stubber) -> None:
    describe(ec2, reservation(kind="default", itype="p5en.48xlarge", zone="us-east-2b"))
    spec = odcr_spec()
    zone = spec["nodes"]["source"]["network"]["availabilityZone"]
    line = refused("h200-lowlat", spec)
    assert line.endswith("[rule: capacity-zone]")
    assert f"subnet is in {zone}" in line


def test_active_block_deploys_and_the_deadline_stays_inside_the_block(ec2: Stubber) -> None:
    start = LIVE - timedelta(hours=2)
    describe(ec2, reservation(start=start, hours=48))
    mocks = run_main("gb300-lowlat", block_spec())
    [instance] = mocks.of_type("aws:ec2/instance:Instance")
    lt = mocks.one("aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == RID
    # ttl: block = the block's end less AWS's 30 minutes.
    assert instance.inputs["tags"]["flashfleet:expires-at"] == (
        start + timedelta(hours=47, minutes=30)
    ).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_short_ttl_wins_over_the_block(ec2: Stubber) -> None:
    describe(ec2, reservation(start=LIVE - timedelta(hours=2), hours=48))
    spec = block_spec()
    spec["ttl"] = "2h"
    before = datetime.now(UTC).replace(microsecond=0)
    mocks = run_main("gb300-lowlat", spec)
    expires = datetime.fromisoformat(
        mocks.of_type("aws:ec2/instance:Instance")[0]
        .inputs["tags"]["flashfleet:expires-at"]
        .replace("Z", "+00:00")
    )
    assert before + timedelta(hours=2) <= expires <= datetime.now(UTC) + timedelta(hours=2)


def test_wait_sleeps_until_the_block_starts_then_passes() -> None:
    b = resolve_spec(
        "gb300-lowlat", parse_spec("gb300-lowlat", block_spec()), region="us-east-2", has_hf_token=True
    )
    start = NOW + timedelta(hours=3)
    ec2, stub = client()
    for state in ("scheduled", "scheduled", "active"):
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [reservation(state=state, start=start)]},
            {"CapacityReservationIds": [RID]},
        )
    clock = [NOW]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += timedelta(seconds=seconds)

    said: list[str] = []
    with stub:
        r = usable.check_or_wait(ec2, b, wait=True, clock=lambda: clock[0], sleep=sleep, say=said.append)
    assert r is not None
    assert r.state == "active"
    assert slept == [3 * 3600, 60]  # to the start, then a poll until EC2 reports it active
    assert "waiting" in said[0]
    stub.assert_no_pending_responses()


def test_flashfleet_up_refuses_with_exit_2_before_pulumi(
    ec2: Stubber, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pulumi(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("pulumi up must not start")

    monkeypatch.setattr("flashfleet.cli.shared.stackops.up", no_pulumi)
    assert load_stack("gb300-lowlat").needs_capacity_purchase
    assert main(["up", "gb300-lowlat"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("flashfleet up: stack gb300-lowlat: capacity reservation cr-")
    assert err[0].endswith("[rule: capacity-placeholder]")


def test_flashfleet_up_says_when_a_scheduled_block_starts(
    ec2: Stubber, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / "Pulumi.gb300-lowlat.yaml").read_text())
    doc["config"]["flashfleet:stack"] = block_spec()
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.gb300-lowlat.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("FLASHFLEET_PULUMI_PROJECT", str(tmp_path))  # `up` reads the project it drives
    monkeypatch.setattr("flashfleet.cli.shared.stackops.up", lambda *a, **k: pytest.fail("pulumi up started"))
    start = (LIVE + timedelta(days=1)).replace(microsecond=0)
    describe(ec2, reservation(state="scheduled", start=start))
    assert main(["up", "gb300-lowlat"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"is scheduled: starts {start:%Y-%m-%dT%H:%M:%SZ}" in line
    assert line.endswith("[rule: capacity-scheduled]")


def test_plan_and_validate_mark_a_stack_that_needs_a_block(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "gb300-lowlat", "h200-lowlat"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "flashfleet capacity buy gb300-lowlat --offering ID" in out[0]
    assert "capacity" not in out[1]  # on-demand: nothing to buy
    assert main(["plan", "gb300-lowlat"]) == 0
    assert "  capacity Capacity Block: NONE YET (placeholder cr-00000000000000000); pulumi up refuses" in (
        capsys.readouterr().out
    )


def test_an_existing_subnet_gives_the_zone_the_reservation_must_be_in() -> None:
    spec = odcr_spec()
    spec["nodes"]["source"]["network"] = {
        "kind": "existing",
        "vpcId": "vpc-0123456789abcdef0",
        "subnetId": "subnet-0123456789abcdef0",
    }
    b = resolve_spec("h200-lowlat", parse_spec("h200-lowlat", spec), region="us-east-2", has_hf_token=True)
    ec2, stub = client()
    stub.add_response(
        "describe_subnets",
        {"Subnets": [{"SubnetId": "subnet-0123456789abcdef0", "AvailabilityZone": "us-east-2b"}]},
        {"SubnetIds": ["subnet-0123456789abcdef0"]},
    )
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [reservation(kind="default", itype="p5en.48xlarge", zone="us-east-2a")]},
        {"CapacityReservationIds": [RID]},
    )
    with stub, pytest.raises(usable.CapacityRefused) as info:
        usable.check(ec2, b, NOW)
    assert info.value.rule == "capacity-zone"
    assert "subnet is in us-east-2b" in str(info.value)
