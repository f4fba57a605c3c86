"""The real boto3 EC2 client with botocore's Stubber in front of the network.

moto implements neither Capacity Block offerings nor purchases. The Stubber checks every request
against botocore's EC2 service model (parameter names and types) and every canned response too,
so a misspelt parameter or a response of the wrong shape fails here as it would against AWS.
Responses follow the EC2 API reference (DescribeCapacityBlockOfferings, PurchaseCapacityBlock,
DescribeCapacityReservations).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.stub import Stubber

REGION = "us-east-2"
GB300 = "p6e-gb300.36xlarge"
NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
RID = "cr-0123456789abcdef0"


def client() -> tuple[Any, Stubber]:
    ec2 = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return ec2, Stubber(ec2)


def offering(
    oid: str,
    *,
    start: datetime,
    hours: int = 48,
    fee: str = "2400.00",
    count: int = 1,
    zone: str = "us-east-2a",
    itype: str = GB300,
) -> dict[str, Any]:
    return {
        "CapacityBlockOfferingId": oid,
        "InstanceType": itype,
        "AvailabilityZone": zone,
        "InstanceCount": count,
        "StartDate": start,
        "EndDate": start + timedelta(hours=hours),
        "CapacityBlockDurationHours": hours,
        "CapacityBlockDurationMinutes": 0,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }


def reservation(
    *,
    state: str = "active",
    start: datetime = NOW - timedelta(hours=1),
    hours: int = 48,
    zone: str = "us-east-2a",
    itype: str = GB300,
    count: int = 1,
    kind: str = "capacity-block",
    rid: str = RID,
) -> dict[str, Any]:
    return {
        "CapacityReservationId": rid,
        "OwnerId": "123456789012",
        "CapacityReservationArn": f"arn:aws:ec2:{REGION}:123456789012:capacity-reservation/{rid}",
        "InstanceType": itype,
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": zone,
        "Tenancy": "default",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count,
        "EbsOptimized": True,
        "State": state,
        "StartDate": start,
        "EndDate": start + timedelta(hours=hours),
        "EndDateType": "limited",
        "InstanceMatchCriteria": "targeted",
        "CreateDate": start - timedelta(days=1),
        "Tags": [],
        "ReservationType": kind,
    }
