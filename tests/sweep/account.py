"""A moto account for the sweep tests: tags, launches, IAM pairs, snapshots, a Pulumi backend."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from flashfleet.components.tags import EXPIRES_TAG, MANAGED_BY_TAG, STACK_TAG

PAST = "2026-01-01T00:00:00Z"
FUTURE = (datetime.now(UTC) + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
AMI = "ami-12c6146b"  # one of moto's built-in images
SKIP_PG = ["--skip", "placement-group"]


# The regions this account has enabled. moto enables every region (about 40, each costing a
# second to set up); a real account's DescribeRegions lists only its enabled ones, and so does
# this account's.
ENABLED_REGIONS = {"eu-west-1", "us-east-1", "us-west-2"}


def ours(stack: str | None = "live", expires: str | None = PAST, managed: str | None = "flashfleet"):
    out = {}
    if managed is not None:
        out[MANAGED_BY_TAG] = managed
    if stack is not None:
        out[STACK_TAG] = stack
    if expires is not None:
        out[EXPIRES_TAG] = expires
    return out


def spec(kind: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []


def launch(ec2, tags: dict[str, str], **extra: Any) -> str:
    kwargs = {"ImageId": AMI, "MinCount": 1, "MaxCount": 1, "InstanceType": "t3.micro", **extra}
    if tags:
        kwargs["TagSpecifications"] = spec("instance", tags)
    return ec2.run_instances(**kwargs)["Instances"][0]["InstanceId"]


TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
)
INLINE = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "ssm:UpdateInstanceInformation", "Resource": "*"}],
    }
)


def iam_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def iam_role(iam, name: str, tags: dict[str, str]) -> str:
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=TRUST, Tags=iam_tags(tags))
    iam.put_role_policy(RoleName=name, PolicyName="inline", PolicyDocument=INLINE)
    return name


def iam_profile(iam, name: str, tags: dict[str, str], role: str | None) -> str:
    """The profile's ARN; ``role`` goes in it."""
    arn = iam.create_instance_profile(InstanceProfileName=name, Tags=iam_tags(tags))["InstanceProfile"]["Arn"]
    if role is not None:
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
    return arn


def iam_pair(iam, prefix: str, tags: dict[str, str]) -> str:
    """Role ``PREFIX-role`` (with an inline policy) in profile ``PREFIX-profile``; the profile's ARN."""
    return iam_profile(iam, f"{prefix}-profile", tags, iam_role(iam, f"{prefix}-role", tags))


# instance name -> tags; the verdict is in the name's group below


def snapshot(ec2) -> dict[str, Any]:
    """Everything in the account, with instance states."""
    iam = boto3.client("iam")
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] != "terminated"
    }
    return {
        "instances": states,
        "eips": {a["AllocationId"] for a in ec2.describe_addresses()["Addresses"]},
        "lts": {t["LaunchTemplateId"] for t in ec2.describe_launch_templates()["LaunchTemplates"]},
        "sgs": {g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]},
        "kps": {k["KeyName"] for k in ec2.describe_key_pairs()["KeyPairs"]},
        "vols": {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]},
        "vpcs": {v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]},
        "subnets": {s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]},
        "igws": {g["InternetGatewayId"] for g in ec2.describe_internet_gateways()["InternetGateways"]},
        "rts": {t["RouteTableId"] for t in ec2.describe_route_tables()["RouteTables"]},
        "roles": {r["RoleName"] for r in iam.list_roles()["Roles"]},
        "profiles": {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]},
    }


def everything(snap: dict[str, Any]) -> set[str]:
    return set(snap["instances"]).union(*(v for k, v in snap.items() if k != "instances"))


def a_backend_knowing(monkeypatch, *stacks: str) -> None:
    """The Pulumi workspace that backend_stacks asks (no Pulumi CLI can run here): it lists these."""

    @dataclass
    class Summary:
        name: str

    class Workspace:
        def __init__(self, **_: Any) -> None: ...

        def list_stacks(self) -> list[Summary]:
            return [Summary(s) for s in stacks]

    from pulumi import automation

    monkeypatch.setattr(automation, "LocalWorkspace", Workspace)
