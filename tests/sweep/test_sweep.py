"""`flashfleet sweep` with boto3 against moto's server on 127.0.0.1 (found through AWS_ENDPOINT_URL).

ONE account holds, side by side, what reviews found deleted or left behind: expired flashfleet
resources of every kind; a colleague's unexpired cluster of a stack this checkout has no file
for; look-alikes (one flashfleet tag only, other spellings, another managed-by, empty values);
unreadable expiries (relative dates, offsets, typos); stopped instances; an expired instance
protected from termination; an expired security group, Elastic IP, VPC and instance profile that
live instances still use; foreign and untagged resources. Only the expired flashfleet resources
nothing live uses may go; a dry run changes nothing. moto has no placement-group API: that
listing fails, which must fail the sweep (exit 1) unless it is skipped knowingly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from flashfleet import sweep
from flashfleet.cli import main
from flashfleet.components.tags import EXPIRES_TAG, MANAGED_BY_TAG, STACK_TAG, is_ours, parse_expiry

from .account import AMI, FUTURE, PAST, SKIP_PG, TRUST, everything, iam_pair, launch, ours, snapshot, spec

INSTANCES: dict[str, dict[str, str]] = {
    "expired": ours(),
    "expired_legacy": ours(managed=None),  # both flashfleet tags, made before managed-by
    "expired_stopped": ours(),
    "colleague": ours(stack="colleagues-stack", expires=FUTURE),  # no local stack file: 5 h left
    "colleague_legacy": ours(stack="colleagues-stack", expires=FUTURE, managed=None),
    "no_expiry": ours(expires=None),
    "unexpired_stopped": ours(expires=FUTURE),
    "stack_only": {STACK_TAG: "live"},  # look-alike: one flashfleet tag is not evidence
    "expires_only": {EXPIRES_TAG: PAST},
    "other_spelling": {"Flashfleet:Stack": "live", "flashfleet:expires_at": PAST},
    "other_manager": ours(stack=None, managed="terraform"),
    "empty_stack": ours(stack="", managed=None),
    "empty_managed": ours(stack="", managed=""),
    "empty_expiry": ours(expires=""),
    "tomorrow": ours(expires="tomorrow"),
    "next_year": ours(expires="next year"),
    "offset": ours(expires="2026-01-01T00:00:00+01:00"),
    "naive": ours(expires="2026-01-01T00:00:00"),
    "typo": ours(expires="2026-13-01T00:00:00Z"),
    "foreign": {"owner": "someone-else", "expires-at": PAST},
    "untagged": {},
}
STALE = {"expired", "expired_legacy", "expired_stopped"}
KEPT_OURS = {
    "colleague",
    "colleague_legacy",
    "no_expiry",
    "unexpired_stopped",
    "empty_expiry",
    "tomorrow",
    "next_year",
    "offset",
    "naive",
    "typo",
}
NOT_OURS = set(INSTANCES) - STALE - KEPT_OURS


@pytest.fixture
def account(ec2) -> dict[str, str]:
    ids = {name: launch(ec2, tags) for name, tags in INSTANCES.items()}
    for name in ("expired_stopped", "unexpired_stopped"):
        ec2.stop_instances(InstanceIds=[ids[name]])

    # a security group that expired while a live instance still uses it (was once deleted)
    default_vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    ids["sg_used"] = ec2.create_security_group(
        GroupName="ff-used",
        Description="x",
        VpcId=default_vpc,
        TagSpecifications=spec("security-group", ours()),
    )["GroupId"]
    ids["live_user"] = launch(ec2, ours(expires=FUTURE), SecurityGroupIds=[ids["sg_used"]])
    ids["sg_expired"] = ec2.create_security_group(
        GroupName="ff-expired", Description="x", TagSpecifications=spec("security-group", ours())
    )["GroupId"]
    ids["sg_foreign"] = ec2.create_security_group(GroupName="not-ours", Description="x")["GroupId"]

    # an expired instance protected from termination, with its own expired security group
    ids["sg_protected"] = ec2.create_security_group(
        GroupName="ff-protected", Description="x", TagSpecifications=spec("security-group", ours())
    )["GroupId"]
    ids["protected"] = launch(ec2, ours(), SecurityGroupIds=[ids["sg_protected"]])
    ec2.modify_instance_attribute(InstanceId=ids["protected"], DisableApiTermination={"Value": True})

    # network: an expired VPC nothing uses, and an expired one a live instance is in
    for label, used in (("net", False), ("net_used", True)):
        vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16", TagSpecifications=spec("vpc", ours()))["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(
            VpcId=vpc, CidrBlock="10.9.0.0/20", TagSpecifications=spec("subnet", ours())
        )["Subnet"]["SubnetId"]
        igw = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway", ours()))[
            "InternetGateway"
        ]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        rt = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table", ours()))["RouteTable"][
            "RouteTableId"
        ]
        ec2.create_route(RouteTableId=rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
        ec2.associate_route_table(RouteTableId=rt, SubnetId=subnet)
        ids |= {f"{label}_vpc": vpc, f"{label}_subnet": subnet, f"{label}_igw": igw, f"{label}_rt": rt}
        # what AWS makes with a VPC and deletes with it: its default group and main route table
        by_vpc = [{"Name": "vpc-id", "Values": [vpc]}]
        ids[f"{label}_default_sg"] = ec2.describe_security_groups(
            Filters=[*by_vpc, {"Name": "group-name", "Values": ["default"]}]
        )["SecurityGroups"][0]["GroupId"]
        ids[f"{label}_main_rt"] = ec2.describe_route_tables(
            Filters=[*by_vpc, {"Name": "association.main", "Values": ["true"]}]
        )["RouteTables"][0]["RouteTableId"]
        if used:
            ids["net_user"] = launch(ec2, ours(expires=FUTURE), SubnetId=subnet)

    # Elastic IPs: expired and loose (bills), expired but on a live instance, foreign
    ids["eip_loose"] = ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip", ours()))[
        "AllocationId"
    ]
    ids["eip_used"] = ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip", ours()))[
        "AllocationId"
    ]
    ec2.associate_address(AllocationId=ids["eip_used"], InstanceId=ids["colleague"])
    ids["eip_of_expired"] = ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip", ours()))[
        "AllocationId"
    ]
    ec2.associate_address(AllocationId=ids["eip_of_expired"], InstanceId=ids["expired"])
    ids["eip_foreign"] = ec2.allocate_address(Domain="vpc")["AllocationId"]

    # IAM: an expired role + profile nothing uses, an expired pair a live instance uses, a foreign role
    iam = boto3.client("iam")
    for label in ("iam", "iam_used"):
        arn = iam_pair(iam, f"ff-{label}", ours())
        ids |= {f"{label}_role": f"ff-{label}-role", f"{label}_profile": f"ff-{label}-profile"}
        if label == "iam_used":
            ids["iam_user"] = launch(ec2, ours(expires=FUTURE), IamInstanceProfile={"Arn": arn})
    iam.create_role(RoleName="someone-elses-role", AssumeRolePolicyDocument=TRUST)

    # templates, key pairs, loose volumes
    ids["lt"] = ec2.create_launch_template(
        LaunchTemplateName="ff-expired", LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=spec("launch-template", ours()),
    )["LaunchTemplate"]["LaunchTemplateId"]  # fmt: skip
    ids["lt_keep"] = ec2.create_launch_template(
        LaunchTemplateName="ff-live", LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=spec("launch-template", ours(expires=FUTURE)),
    )["LaunchTemplate"]["LaunchTemplateId"]  # fmt: skip
    ids["kp"] = ec2.create_key_pair(KeyName="ff-expired", TagSpecifications=spec("key-pair", ours()))[
        "KeyName"
    ]
    ids["kp_lookalike"] = ec2.create_key_pair(
        KeyName="ff-lookalike", TagSpecifications=spec("key-pair", {STACK_TAG: "gone"})
    )["KeyName"]
    ids["vol"] = ec2.create_volume(
        Size=1, AvailabilityZone="eu-west-1a", TagSpecifications=spec("volume", ours())
    )["VolumeId"]
    ids["vol_foreign"] = ec2.create_volume(Size=1, AvailabilityZone="eu-west-1a")["VolumeId"]
    return ids


STALE_OTHERS = {
    "sg_expired",
    "net_vpc",
    "net_subnet",
    "net_igw",
    "net_rt",
    "eip_loose",
    "eip_of_expired",
    "iam_role",
    "iam_profile",
    "lt",
    "kp",
    "vol",
}
IN_USE = {
    "sg_used",
    "sg_protected",
    "net_used_vpc",
    "net_used_subnet",
    "net_used_igw",
    "net_used_rt",
    "eip_used",
}
IN_USE_IAM = {"iam_used_role", "iam_used_profile"}


def test_find_classifies_every_case(ec2, account):
    ids = account
    unlisted: dict[str, str] = {}
    findings = sweep.find(sweep.clients(), now=datetime.now(UTC), unlisted=unlisted)
    assert set(unlisted) == {"placement-group"}  # moto has no placement-group API
    by_id = {f.id: f for f in findings}
    for name in STALE | {"protected"} | STALE_OTHERS | IN_USE | IN_USE_IAM:
        assert by_id[ids[name]].stale, name
    for name in KEPT_OURS:
        assert not by_id[ids[name]].stale, name
    for name in NOT_OURS | {"sg_foreign", "vol_foreign", "eip_foreign", "kp_lookalike"}:
        assert ids[name] not in by_id, name  # not ours: not even listed
    assert "someone-elses-role" not in by_id
    assert by_id[ids["expired"]].reason == f"expired at {PAST}"
    assert by_id[ids["colleague"]].reason == f"kept: expires at {FUTURE}"
    assert by_id[ids["tomorrow"]].reason == f"kept: unreadable {EXPIRES_TAG} 'tomorrow'"
    assert by_id[ids["no_expiry"]].reason == f"kept: no {EXPIRES_TAG}"
    kinds = [f.kind for f in findings]
    assert kinds == sorted(kinds, key=sweep.KINDS.index)  # instances first: deletion order


def test_dry_run_changes_nothing(ec2, account, capsys):
    before = snapshot(ec2)
    assert main(["sweep", *SKIP_PG]) == 0
    out = capsys.readouterr().out
    assert snapshot(ec2) == before
    for name in STALE:
        assert f"would delete instance         {account[name]}" in out
    for name in KEPT_OURS | NOT_OURS:
        assert account[name] not in out
    assert "dry run, nothing changed" in out


def test_yes_deletes_only_expired_flashfleet_resources_nothing_live_uses(ec2, account, capsys):
    ids = account
    before = snapshot(ec2)
    rc = main(["sweep", "--yes", "--format", "json", *SKIP_PG])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1  # the protected instance
    after = snapshot(ec2)
    gone = {ids[n] for n in STALE | STALE_OTHERS}
    # exactly the expired, unused flashfleet resources went (root volumes of terminated instances
    # go with them: DeleteOnTermination)
    with_the_vpc = {ids["net_default_sg"], ids["net_main_rt"]}
    root_volumes = before["vols"] - after["vols"] - {ids["vol"]}
    assert everything(before) - everything(after) - root_volumes == gone | with_the_vpc
    assert set(report["deleted"]) == gone
    # every other instance is still there, in the state it was in (stopped ones stay stopped)
    kept = {ids[n] for n in KEPT_OURS | NOT_OURS | {"protected", "live_user", "net_user", "iam_user"}}
    assert {i: after["instances"][i] for i in kept} == {i: before["instances"][i] for i in kept}
    assert after["instances"][ids["unexpired_stopped"]] == "stopped"
    # one protected instance fails alone and keeps what it uses
    assert list(report["errors"]) == [ids["protected"]]
    assert "OperationNotPermitted" in report["errors"][ids["protected"]]
    assert set(report["kept_in_use"]) == {ids[n] for n in IN_USE | IN_USE_IAM}
    assert "live" in report["kept_in_use"][ids["sg_used"]]
    assert ids["eip_foreign"] in after["eips"]
    assert "someone-elses-role" in after["roles"]


def test_a_listing_the_api_refuses_fails_the_sweep(ec2, account, capsys):
    before = snapshot(ec2)
    assert main(["sweep"]) == 1
    err = capsys.readouterr().err
    assert "error: could not list placement-groups, not swept" in err
    assert snapshot(ec2) == before


def test_stack_filter_limits_the_sweep(ec2, account, capsys):
    """(And each --stack is matched as a whole value.)"""
    ec2.create_tags(Resources=[account["expired_legacy"]], Tags=[{"Key": STACK_TAG, "Value": "other"}])
    assert main(["sweep", "--stack", "other", "--yes", "--format", "json", *SKIP_PG]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == [account["expired_legacy"]]
    assert account["expired"] in snapshot(ec2)["instances"]


def test_orphans_are_reported_not_deleted_on_the_backend_word(ec2, account, monkeypatch, capsys):
    """A colleague's cluster has no file in this checkout's stacks/, and the Pulumi backend asked
    does not know its stack: reported as an orphan, never deleted on that alone (it has 5 h left)."""
    ids = account
    Path("stacks").mkdir()
    Path("stacks/Pulumi.live.yaml").write_text("config: {}\n")
    monkeypatch.setattr(sweep, "backend_stacks", lambda: {"live"})
    assert main(["sweep", "--orphans", "--all", "--format", "json", *SKIP_PG]) == 0
    report = json.loads(capsys.readouterr().out)
    orphaned = {f["id"]: (f["stale"], f["reason"]) for f in report["findings"] if f["orphan"]}
    note = "; the Pulumi backend has no stack colleagues-stack (not evidence alone"
    assert {i: stale for i, (stale, _) in orphaned.items()} == {
        ids["colleague"]: False,
        ids["colleague_legacy"]: False,
    }
    assert all(note in reason for _, reason in orphaned.values())
    assert report["orphan_stacks"] == ["colleagues-stack"]
    assert main(["sweep", "--orphans", "--yes", "--format", "json", *SKIP_PG]) == 1  # (the protected one)
    assert {ids["colleague"], ids["colleague_legacy"]} <= set(snapshot(ec2)["instances"])


def test_orphans_without_a_backend_are_refused(ec2, account, monkeypatch, tmp_path, capsys):
    """The real backend lister: no Pulumi CLI or an empty backend here, so --orphans refuses."""
    empty = tmp_path / "backend"
    empty.mkdir()
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{empty}")
    monkeypatch.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
    before = snapshot(ec2)
    assert main(["sweep", "--orphans", "--yes", *SKIP_PG]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flashfleet sweep: --orphans: ")
    assert "refusing to judge orphans" in err
    assert len(err.strip().splitlines()) == 1
    assert snapshot(ec2) == before


@pytest.mark.parametrize(
    "text",
    [
        "tomorrow",
        "next year",
        "",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00+00:00",
        "2026-02-30T00:00:00Z",
        "2026-01-01T00:00:00Z\n",  # `$` alone would let a trailing newline through
    ],
)
def test_expiry_must_be_absolute_canonical_utc(text):
    with pytest.raises(ValueError, match=r"absolute UTC time|does not match|day is out of range"):
        parse_expiry(text)


def test_parse_expiry():
    assert parse_expiry("2026-11-29T18:00:00Z") == datetime(2026, 11, 29, 18, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tags", "owned"),
    [
        ({MANAGED_BY_TAG: "flashfleet"}, True),
        ({STACK_TAG: "a", EXPIRES_TAG: PAST}, True),
        ({STACK_TAG: "a"}, False),
        ({EXPIRES_TAG: PAST}, False),
        ({STACK_TAG: "", EXPIRES_TAG: PAST}, False),
        ({STACK_TAG: "a b", EXPIRES_TAG: PAST}, False),
        ({STACK_TAG: "a", EXPIRES_TAG: "soon"}, False),
        ({MANAGED_BY_TAG: "flashfleet-ish", EXPIRES_TAG: PAST}, False),
        ({MANAGED_BY_TAG: ""}, False),
        # another managed-by names another owner, even beside both other flashfleet tags
        ({MANAGED_BY_TAG: "flashfleet ", STACK_TAG: "a", EXPIRES_TAG: PAST}, False),
        ({MANAGED_BY_TAG: "", STACK_TAG: "a", EXPIRES_TAG: PAST}, False),
        ({MANAGED_BY_TAG: "terraform", STACK_TAG: "a", EXPIRES_TAG: PAST}, False),
        ({MANAGED_BY_TAG: "Flashfleet", STACK_TAG: "a", EXPIRES_TAG: PAST}, False),
        ({STACK_TAG: "old\n", EXPIRES_TAG: PAST}, False),
        ({STACK_TAG: "a", EXPIRES_TAG: PAST + "\n"}, False),
    ],
)
def test_ownership_needs_evidence(tags, owned):
    assert is_ours(tags) is owned
