"""The weights cache in EC2 (moto's server): the snapshot made after the first bring-up, kept
(not made twice) by the next, and deleted by `flashfleet sweep` only once it has expired, never
because the stack that made it is gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flashfleet import sweep
from flashfleet.cli import main
from flashfleet.components.tags import CACHE_TAG, EXPIRES_TAG, MANAGED_BY_TAG, STACK_TAG, iso_utc, tag_map
from flashfleet.components.weights_cache import CACHE_KEY_TAG, CHECKPOINT_TAG, REVISION_TAG, keep_weights

from .account import FUTURE, PAST, launch, spec

KEY = "0123456789abcdef"
TAGS = {
    "Name": f"h200-lowlat-weights-{KEY}",
    MANAGED_BY_TAG: "flashfleet",
    STACK_TAG: "h200-lowlat",
    CACHE_TAG: "weights",
    CACHE_KEY_TAG: KEY,
    CHECKPOINT_TAG: "zai-org/GLM-5.3-Flash",
    REVISION_TAG: "0123456789abcdef0123456789abcdef01234567",
}
SKIP = ["--skip", "placement-group"]


def _node(ec2: Any) -> str:
    """A node as the launch template makes it: the root disk and the weights volume at /dev/sdf."""
    return launch(
        ec2,
        {MANAGED_BY_TAG: "flashfleet", STACK_TAG: "h200-lowlat", EXPIRES_TAG: FUTURE},
        BlockDeviceMappings=[{"DeviceName": "/dev/sdf", "Ebs": {"VolumeSize": 400, "VolumeType": "gp3"}}],
    )


def _snapshots(ec2: Any) -> list[dict[str, Any]]:
    """The account's cache snapshots (moto's own images come with snapshots of their own)."""
    return [
        s
        for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
        if CACHE_TAG in tag_map(s.get("Tags"))
    ]


def _weights_volume(ec2: Any, instance: str) -> str:
    [volume] = ec2.describe_volumes(
        Filters=[
            {"Name": "attachment.instance-id", "Values": [instance]},
            {"Name": "attachment.device", "Values": ["/dev/sdf"]},
        ]
    )["Volumes"]
    return str(volume["VolumeId"])


def test_the_first_bringup_snapshots_node_0s_weights_volume_with_its_evidence(ec2) -> None:
    node = _node(ec2)
    expires = iso_utc(datetime.now(UTC) + timedelta(days=7))
    done = keep_weights(ec2, instance_id=node, device="/dev/sdf", tags=TAGS, expires_at=expires)
    assert done["made"] is True
    assert done["expires_at"] == expires
    [snapshot] = _snapshots(ec2)
    assert snapshot["SnapshotId"] == done["snapshot_id"]
    assert snapshot["VolumeId"] == _weights_volume(ec2, node)  # the weights, not the root disk
    assert tag_map(snapshot.get("Tags")) == {**TAGS, EXPIRES_TAG: expires}


def test_the_next_bringup_keeps_that_snapshot_and_only_ever_moves_its_expiry_later(ec2) -> None:
    first = iso_utc(datetime.now(UTC) + timedelta(days=7))
    made = keep_weights(ec2, instance_id=_node(ec2), device="/dev/sdf", tags=TAGS, expires_at=first)
    later = iso_utc(datetime.now(UTC) + timedelta(days=9))
    kept = keep_weights(ec2, instance_id=_node(ec2), device="/dev/sdf", tags=TAGS, expires_at=later)
    assert kept == {"snapshot_id": made["snapshot_id"], "made": False, "expires_at": later}
    sooner = iso_utc(datetime.now(UTC) + timedelta(days=1))
    again = keep_weights(ec2, instance_id=_node(ec2), device="/dev/sdf", tags=TAGS, expires_at=sooner)
    assert again["expires_at"] == later  # a shorter keepDays elsewhere never cuts a cache short
    [snapshot] = _snapshots(ec2)
    assert tag_map(snapshot.get("Tags"))[EXPIRES_TAG] == later


def test_a_snapshot_of_another_key_or_owner_is_not_the_cache(ec2) -> None:
    node = _node(ec2)
    volume = _weights_volume(ec2, node)
    ec2.create_snapshot(
        VolumeId=volume, TagSpecifications=spec("snapshot", {**TAGS, CACHE_KEY_TAG: "f" * 16})
    )
    ec2.create_snapshot(
        VolumeId=volume, TagSpecifications=spec("snapshot", {**TAGS, MANAGED_BY_TAG: "terraform"})
    )
    expires = iso_utc(datetime.now(UTC) + timedelta(days=7))
    done = keep_weights(ec2, instance_id=node, device="/dev/sdf", tags=TAGS, expires_at=expires)
    assert done["made"] is True
    assert len(_snapshots(ec2)) == 3


def test_a_node_without_its_weights_volume_is_named(ec2) -> None:
    bare = launch(ec2, {MANAGED_BY_TAG: "flashfleet"})
    with pytest.raises(RuntimeError, match=f"{bare} has 0 volumes at /dev/sdf"):
        keep_weights(ec2, instance_id=bare, device="/dev/sdf", tags=TAGS, expires_at=FUTURE)


def _cache(ec2: Any, node: str, expires: str, stack: str = "h200-lowlat") -> str:
    tags = {**TAGS, STACK_TAG: stack, EXPIRES_TAG: expires}
    return str(
        ec2.create_snapshot(VolumeId=_weights_volume(ec2, node), TagSpecifications=spec("snapshot", tags))[
            "SnapshotId"
        ]
    )


def test_sweep_deletes_an_expired_cache_and_keeps_a_live_one_whose_stack_is_gone(ec2, capsys) -> None:
    node = _node(ec2)
    expired, live = _cache(ec2, node, PAST), _cache(ec2, node, FUTURE, stack="gone-stack")
    kinds = [k for k in sweep.KINDS if k != "placement-group"]  # an API moto lacks
    found = {f.id: f for f in sweep.find(sweep.clients(), now=datetime.now(UTC), known=set(), kinds=kinds)}
    assert found[expired].stale
    assert not found[live].stale
    assert not found[live].orphan
    assert found[live].reason == f"kept: expires at {FUTURE}"
    assert main(["sweep", "--yes", *SKIP]) == 0
    assert {s["SnapshotId"] for s in _snapshots(ec2)} == {live}
    assert expired in capsys.readouterr().out


def test_sweep_keeps_an_expired_cache_an_ami_is_made_of(ec2, capsys) -> None:
    # moto makes an image's snapshots itself (it ignores a RegisterImage's snapshot): tag the one
    # the image is made of as an expired cache
    image = ec2.create_image(InstanceId=_node(ec2), Name="made-from-the-cache")["ImageId"]
    [made_of] = ec2.describe_images(ImageIds=[image])["Images"][0]["BlockDeviceMappings"]
    snapshot = made_of["Ebs"]["SnapshotId"]
    ec2.create_tags(Resources=[snapshot], Tags=spec("snapshot", {**TAGS, EXPIRES_TAG: PAST})[0]["Tags"])
    assert main(["sweep", "--yes", *SKIP]) == 0
    assert snapshot in {s["SnapshotId"] for s in _snapshots(ec2)}
    out = capsys.readouterr().out
    assert snapshot in out
    assert "an AMI of the account is made of it" in out
