"""Find, and on request delete, flashfleet resources that nothing should be paying for any more.

A resource is flashfleet's when it carries the tag ``flashfleet:stack`` or
``flashfleet:expires-at``; anything else is never touched. One of ours is stale when its
``flashfleet:expires-at`` (ISO 8601 UTC, e.g. ``2026-11-29T18:00:00Z``) has passed, or when its
``flashfleet:stack`` names a stack whose ``Pulumi.<name>.yaml`` is gone from the stacks directory
(a crashed laptop or CI job that never ran `down`). An expiry that cannot be read keeps the
resource and says so: a typo must not delete a live cluster.

The EC2 client comes from boto3's standard chain (credentials, region, ``AWS_ENDPOINT_URL``).
Deletion order follows the dependencies: instances first (waited for), then what they used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flashfleet.components.tags import EXPIRES_TAG, ROLE_TAG, STACK_TAG

OUR_TAGS = (STACK_TAG, EXPIRES_TAG)

# The order resources are deleted in: nothing is deleted before what uses it is gone.
KINDS = ("instance", "launch-template", "placement-group", "security-group", "key-pair", "volume")

LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped"]


@dataclass(frozen=True)
class Finding:
    kind: str
    id: str
    stack: str | None
    role: str | None
    expires_at: str | None
    stale: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Deletion:
    finding: Finding
    error: str | None  # None: deleted


def known_stacks(stacks_dir: Path) -> set[str]:
    """Stack names = files stacks/Pulumi.<name>.yaml. A missing directory is an error: treating it
    as "no stacks" would make every live cluster look abandoned."""
    if not stacks_dir.is_dir():
        raise FileNotFoundError(f"stacks directory {stacks_dir} does not exist")
    names = set()
    for path in stacks_dir.glob("Pulumi.*.y*ml"):
        if path.suffix in (".yaml", ".yml"):
            names.add(path.name[len("Pulumi.") : -len(path.suffix)])
    return names


def parse_expiry(text: str) -> datetime:
    """ISO 8601 with a UTC offset ('Z' or +00:00 style); a naive time is refused."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.astimezone(UTC)


def judge(tags: Mapping[str, str], now: datetime, stacks: set[str]) -> tuple[bool, str] | None:
    """(stale, why) for one of ours; None for a resource that is not flashfleet's."""
    if not any(t in tags for t in OUR_TAGS):
        return None
    reasons = []
    unreadable = None
    expires = tags.get(EXPIRES_TAG)
    if expires is not None:
        try:
            moment = parse_expiry(expires)
        except ValueError:
            unreadable = f"kept: unreadable {EXPIRES_TAG} {expires!r}"
        else:
            if moment <= now:
                reasons.append(f"expired at {expires}")
    stack = tags.get(STACK_TAG)
    if stack is not None and stack not in stacks:
        reasons.append(f"stack {stack} no longer exists")
    if reasons and unreadable is None:
        return True, "; ".join(reasons)
    if unreadable is not None:
        return False, unreadable + (f" (otherwise: {'; '.join(reasons)})" if reasons else "")
    return False, f"kept: expires at {expires}" if expires else "kept: stack exists, no expiry"


def _tags(items: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or ()}


def _pages(ec2: Any, op: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    if ec2.can_paginate(op):
        for page in ec2.get_paginator(op).paginate(**kwargs):
            yield from page.get(key, [])
    else:
        yield from getattr(ec2, op)(**kwargs).get(key, [])


def _instances(ec2: Any) -> Iterator[tuple[str, dict[str, str]]]:
    filters = [{"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES}]
    for reservation in _pages(ec2, "describe_instances", "Reservations", Filters=filters):
        for inst in reservation.get("Instances", []):
            yield inst["InstanceId"], _tags(inst.get("Tags"))


def _listing(
    op: str, key: str, id_key: str, **kwargs: Any
) -> Callable[[Any], Iterator[tuple[str, dict[str, str]]]]:
    def items(ec2: Any) -> Iterator[tuple[str, dict[str, str]]]:
        for item in _pages(ec2, op, key, **kwargs):
            yield item[id_key], _tags(item.get("Tags"))

    return items


LISTINGS: dict[str, Callable[[Any], Iterator[tuple[str, dict[str, str]]]]] = {
    "instance": _instances,
    "launch-template": _listing("describe_launch_templates", "LaunchTemplates", "LaunchTemplateId"),
    "placement-group": _listing("describe_placement_groups", "PlacementGroups", "GroupName"),
    "security-group": _listing("describe_security_groups", "SecurityGroups", "GroupId"),
    "key-pair": _listing("describe_key_pairs", "KeyPairs", "KeyName"),
    # attached volumes go with their instance (DeleteOnTermination); only loose ones are swept
    "volume": _listing(
        "describe_volumes", "Volumes", "VolumeId", Filters=[{"Name": "status", "Values": ["available"]}]
    ),
}


def find(
    ec2: Any,
    *,
    now: datetime,
    stacks: set[str],
    stack: str | None = None,
    unlisted: dict[str, str] | None = None,
) -> list[Finding]:
    """Every flashfleet resource (of ``stack`` only, when given), stale or kept, in deletion order.

    A kind the endpoint cannot list (an API an emulator lacks, a missing permission) is recorded
    in ``unlisted`` (kind -> error) and the other kinds are still swept. Instances are not
    optional: failing to list them fails the sweep.
    """
    found: list[tuple[str, str, dict[str, str]]] = []
    for kind in KINDS:
        try:
            found += [(kind, rid, tags) for rid, tags in LISTINGS[kind](ec2)]
        except Exception as err:
            if kind == "instance" or unlisted is None:
                raise
            unlisted[kind] = f"{type(err).__name__}: {err}".splitlines()[0]
    out = []
    for kind, rid, tags in found:
        verdict = judge(tags, now, stacks)
        if verdict is None or (stack is not None and tags.get(STACK_TAG) != stack):
            continue
        stale, reason = verdict
        out.append(
            Finding(kind, rid, tags.get(STACK_TAG), tags.get(ROLE_TAG), tags.get(EXPIRES_TAG), stale, reason)
        )
    return sorted(out, key=lambda f: (KINDS.index(f.kind), f.id))


def _delete_one(ec2: Any, finding: Finding) -> None:
    calls: dict[str, Callable[[], Any]] = {
        "launch-template": lambda: ec2.delete_launch_template(LaunchTemplateId=finding.id),
        "placement-group": lambda: ec2.delete_placement_group(GroupName=finding.id),
        "security-group": lambda: ec2.delete_security_group(GroupId=finding.id),
        "key-pair": lambda: ec2.delete_key_pair(KeyName=finding.id),
        "volume": lambda: ec2.delete_volume(VolumeId=finding.id),
    }
    calls[finding.kind]()


def delete(
    ec2: Any, findings: Iterable[Finding], *, wait_delay_s: int = 10, wait_attempts: int = 60
) -> list[Deletion]:
    """Delete the stale findings; one failure does not stop the rest (each is reported)."""
    stale = [f for f in findings if f.stale]
    done: list[Deletion] = []
    instances = [f for f in stale if f.kind == "instance"]
    if instances:
        ids = [f.id for f in instances]
        try:
            ec2.terminate_instances(InstanceIds=ids)
            # security groups and placement groups stay in use until the instances are gone
            ec2.get_waiter("instance_terminated").wait(
                InstanceIds=ids, WaiterConfig={"Delay": wait_delay_s, "MaxAttempts": wait_attempts}
            )
            done += [Deletion(f, None) for f in instances]
        except Exception as err:
            done += [Deletion(f, f"{type(err).__name__}: {err}") for f in instances]
    for finding in stale:
        if finding.kind == "instance":
            continue
        try:
            _delete_one(ec2, finding)
            done.append(Deletion(finding, None))
        except Exception as err:
            done.append(Deletion(finding, f"{type(err).__name__}: {err}"))
    return done


def ec2_client(region: str | None = None) -> Any:
    """boto3's EC2 client with the standard settings (profile, region, AWS_ENDPOINT_URL...)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "ec2", region_name=region, config=Config(retries={"mode": "standard", "max_attempts": 3})
    )
