"""The weights volume of an AWS stack, kept as an EBS snapshot between bring-ups.

``caches.weightsSnapshot`` (flashfleet.planning.weights_snapshot decides the key, size and
expiry). Every GPU node gets a weights volume of its own in the launch template (``/dev/sdf``,
gp3, encrypted, deleted with the instance), mounted at the model cache dir by the model_weights
role. The life of the cache:

- ``up``: the program asks EC2 for the newest completed snapshot of the key that flashfleet made
  (``restore_from``). With one, every node's weights volume is created from it, and the download
  finds the files already there (the role checks each against the lock). Without one, the
  volume starts empty and the bring-up downloads as usual.
- after the bring-up has served its first answers: ``WeightsSnapshot`` keeps the cache. If a
  snapshot of the key exists already (the one just restored, or one still being made), its
  ``flashfleet:expires-at`` moves to ``keepDays`` after now; otherwise node 0's weights volume is
  snapshotted, with the same tags. EC2 makes the snapshot in the background: `up` does not wait
  for it, and the next `up` restores it only once it is completed.
- ``down``: the volumes go with the instances; the snapshot stays. It is not in any stack's
  state, so no ``destroy`` removes it: its own tags are the evidence (``flashfleet:cache`` and
  ``flashfleet:cache-key``, the checkpoint and its commit, ``flashfleet:stack`` of the stack that
  made it, ``flashfleet:expires-at``), and ``flashfleet sweep`` deletes it once it has expired,
  never because its stack is gone: a cache outlives its stack by design.

A volume created from a snapshot fetches each block from S3 on its first read (lazy loading):
the first load of the weights is slow unless the stack asks for a provisioned initialization
rate (``initializationRateMibs``, billed per GiB). docs/bringup-time.md has the figures.

The restore is decided when a node's launch template is created: a snapshot that appears later
does not replace running instances (the template ignores later changes of its snapshot id).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult
from pulumi_aws import ebs

from flashfleet.aws_client import aws_client
from flashfleet.components.tags import (
    CACHE_TAG,
    EXPIRES_TAG,
    MANAGED_BY,
    MANAGED_BY_TAG,
    STACK_TAG,
    is_ours,
    iso_utc,
    parse_expiry,
    tag_map,
)
from flashfleet.planning.weights_snapshot import WeightsSnapshotPlan

CACHE_KEY_TAG = "flashfleet:cache-key"
CHECKPOINT_TAG = "flashfleet:checkpoint"
REVISION_TAG = "flashfleet:revision"
WEIGHTS = "weights"
# EC2 snapshot states: a snapshot still being made is kept (not made twice), restored only done.
LIVE_STATES = ("pending", "completed")
# The launch template's fields of the weights volume that follow the snapshot it restores.
RESTORE_FIELDS = ("snapshotId", "encrypted", "volumeInitializationRate")


def cache_tags(stack: str, plan: WeightsSnapshotPlan) -> dict[str, str]:
    """What a cache snapshot carries besides its expiry: whose it is and what it holds. The
    checkpoint is the model's repository; the key also covers a draft beside it."""
    model, commit = next(iter(plan.commits.items()))
    return {
        "Name": f"{stack}-weights-{plan.key}",
        MANAGED_BY_TAG: MANAGED_BY,
        STACK_TAG: stack,
        CACHE_TAG: WEIGHTS,
        CACHE_KEY_TAG: plan.key,
        CHECKPOINT_TAG: model,
        REVISION_TAG: commit,
    }


def restore_from(plan: WeightsSnapshotPlan) -> pulumi.Output[str | None]:
    """The newest completed snapshot of the key that flashfleet made, or None (EC2 lists them
    newest first). An expired one not yet swept is still the same bytes: the bring-up that
    restores it extends its expiry."""
    found = ebs.get_snapshot_ids_output(
        owners=["self"],
        filters=[
            {"name": f"tag:{CACHE_KEY_TAG}", "values": [plan.key]},
            {"name": f"tag:{MANAGED_BY_TAG}", "values": [MANAGED_BY]},
            {"name": "status", "values": ["completed"]},
        ],
    )
    return found.ids.apply(lambda ids: ids[0] if ids else None)


# --- after the bring-up: keep the cache -----------------------------------------------------------


def _live_snapshot(ec2: Any, key: str) -> dict[str, Any] | None:
    """The newest snapshot of the key that is flashfleet's and done or being made."""
    pages = ec2.get_paginator("describe_snapshots").paginate(
        OwnerIds=["self"],
        Filters=[
            {"Name": f"tag:{CACHE_KEY_TAG}", "Values": [key]},
            {"Name": "status", "Values": list(LIVE_STATES)},
        ],
    )
    found = [s for page in pages for s in page.get("Snapshots", []) if is_ours(tag_map(s.get("Tags")))]
    return max(found, key=lambda s: s["StartTime"], default=None)


def _later(current: str | None, wanted: str) -> str:
    try:
        return wanted if current is None or parse_expiry(current) < parse_expiry(wanted) else current
    except ValueError:  # an unreadable expiry is no evidence of anything: ours says when
        return wanted


def keep_weights(
    ec2: Any, *, instance_id: str, device: str, tags: Mapping[str, str], expires_at: str
) -> dict[str, Any]:
    """Keep the cache of ``tags``' key until at least ``expires_at``: extend the snapshot that
    has it, or snapshot the weights volume (``device``) of ``instance_id``. Returns what was
    done, for the resource's outputs."""
    parse_expiry(expires_at)  # never write a tag that sweep would refuse to read
    existing = _live_snapshot(ec2, tags[CACHE_KEY_TAG])
    if existing is not None:
        sid = existing["SnapshotId"]
        expires = _later(tag_map(existing.get("Tags")).get(EXPIRES_TAG), expires_at)
        ec2.create_tags(Resources=[sid], Tags=[{"Key": EXPIRES_TAG, "Value": expires}])
        return {"snapshot_id": sid, "made": False, "expires_at": expires}
    volumes = ec2.describe_volumes(
        Filters=[
            {"Name": "attachment.instance-id", "Values": [instance_id]},
            {"Name": "attachment.device", "Values": [device]},
        ]
    )["Volumes"]
    if len(volumes) != 1:
        raise RuntimeError(f"{instance_id} has {len(volumes)} volumes at {device}, not its weights volume")
    snapshot = ec2.create_snapshot(
        VolumeId=volumes[0]["VolumeId"],
        Description=f"flashfleet weights {tags[CACHE_KEY_TAG]}: {tags[CHECKPOINT_TAG]}@{tags[REVISION_TAG]}",
        TagSpecifications=[
            {
                "ResourceType": "snapshot",
                "Tags": [{"Key": k, "Value": v} for k, v in {**tags, EXPIRES_TAG: expires_at}.items()],
            }
        ],
    )
    return {"snapshot_id": snapshot["SnapshotId"], "made": True, "expires_at": expires_at}


def _keep(props: Mapping[str, Any]) -> dict[str, Any]:
    done = keep_weights(
        aws_client("ec2", props.get("region")),
        instance_id=str(props["instanceId"]),
        device=str(props["device"]),
        tags={str(k): str(v) for k, v in dict(props["tags"]).items()},
        expires_at=iso_utc(datetime.now(UTC) + timedelta(days=int(props["keepDays"]))),
    )
    return {**props, **done}


class WeightsSnapshotProvider(ResourceProvider):
    """Stateless (the engine pickles it): the EC2 client is made per call from the region."""

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("instanceId", "device", "tags", "keepDays", "region", "bringup")
        changed = any(olds.get(k) != news.get(k) for k in keys)
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"weights-cache-{uuid.uuid4().hex[:12]}", _keep(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(_keep(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # the snapshot outlives the stack; sweep deletes it by its expiry tag


class WeightsSnapshot(Resource, module="flashfleet", name="WeightsSnapshot"):
    """Outputs: ``snapshot_id``, ``made`` (a new snapshot, or one kept), ``expires_at``."""

    snapshot_id: pulumi.Output[str]
    made: pulumi.Output[bool]
    expires_at: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        instance_id: pulumi.Input[str],
        plan: WeightsSnapshotPlan,
        stack: str,
        region: str | None,
        bringup: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "instanceId": instance_id,
            "device": plan.device,
            "tags": cache_tags(stack, plan),  # the expiry is set when it runs: keepDays from then
            "keepDays": plan.keep_days,
            "region": region,
            # the bring-up's run: a new one (a changed inventory) keeps the cache again
            "bringup": bringup,
            "snapshot_id": None,  # outputs, declared so they become attributes
            "made": None,
            "expires_at": None,
        }
        super().__init__(WeightsSnapshotProvider(), name, props, opts)
