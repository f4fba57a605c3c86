"""The moto account of the sweep tests, reset for each test, with the regions it has enabled."""

from __future__ import annotations

import urllib.request
from typing import Any

import boto3
import pytest

from .account import ENABLED_REGIONS


@pytest.fixture
def enabled_regions(monkeypatch) -> set[str]:
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    enabled = set(ENABLED_REGIONS)
    everything = RegionsAndZonesBackend.describe_regions

    def describe_regions(self: Any, region_names: list[str] | None = None) -> Any:
        return [r for r in everything(self, region_names) if r.name in enabled]

    monkeypatch.setattr(RegionsAndZonesBackend, "describe_regions", describe_regions)
    return enabled


@pytest.fixture
def ec2(moto_env, enabled_regions, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    # a checkout whose stacks/ knows none of the stacks in the account: it must not matter
    monkeypatch.chdir(tmp_path)
    urllib.request.urlopen(urllib.request.Request(f"{moto_env}/moto-api/reset", method="POST"), timeout=10)
    return boto3.client("ec2")
