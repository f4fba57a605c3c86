"""Find, and on request delete, flashfleet cloud resources whose own tags say they are done.

Evidence travels with the resource, never in a local folder (``flashfleet.components.tags``):
- ours: ``flashfleet.components.tags.is_ours``. Anything else is not listed and never touched.
- stale: its ``flashfleet:expires-at`` (``2026-11-29T18:00:00Z``) has passed. An empty,
  relative or malformed expiry keeps the resource and says so: a typo must not delete a cluster.
- orphan (only with ``known=``, the stacks a Pulumi backend knows): ours, of a stack that backend
  does not list. One backend's silence is not evidence (a per-user backend knows only its user's
  stacks), so an orphan is only reported, unless its stack is also named explicitly (``named=``):
  then it is stale. Never judged from ``stacks/`` on this machine.
- a cache (an EBS snapshot of a stack's weights, ``flashfleet:cache``): it outlives the stack that
  made it by design, so only its expiry makes it stale, never an orphan's verdict. One an AMI of
  the account uses is kept.
- in use: a stale resource a live instance still uses (any instance, ours or not, e.g. one
  protected from termination) is kept: security groups, Elastic IPs, subnets, VPCs, placement
  groups, key pairs, instance profiles and their roles. IAM is global: an instance profile or
  role is in use when a live instance of ANY region uses it, and a region that cannot be listed
  keeps every IAM resource. A role an instance profile still holds is kept; flashfleet takes a
  role out only of a profile it made and is deleting.

Deletion runs in dependency order; instances are terminated one by one, so a protected one
fails alone. Clients come from boto3's standard chain (credentials, region, AWS_ENDPOINT_URL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flashfleet.aws_client import NO_CREDENTIALS, aws_client, ec2_client, has_credentials
from flashfleet.components.tags import (
    CACHE_TAG,
    EXPIRES_TAG,
    ROLE_TAG,
    STACK_TAG,
    fully_ours,
    is_ours,
    parse_expiry,
    tag_map,
    valid_stack,
)

# Deletion order: nothing is deleted before what uses it is gone.
KINDS = (
    "instance",
    "elastic-ip",
    "launch-template",
    "placement-group",
    "security-group",
    "key-pair",
    "volume",
    "snapshot",
    "route-table",
    "internet-gateway",
    "subnet",
    "vpc",
    "instance-profile",
    "iam-role",
)
IAM_KINDS = ("instance-profile", "iam-role")

# Not yet terminated: they bill (a stopped one for its volumes) and they hold what they use.
LIVE_INSTANCE_STATES = ["pending", "running", "shutting-down", "stopping", "stopped"]
SWEEPABLE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped"]

StackLister = Callable[[], set[str]]
"""The stacks a Pulumi backend knows; raises BackendUnavailable when it cannot say."""


class BackendUnavailable(Exception):
    """No Pulumi backend answered: orphans cannot be judged, so none may be deleted."""


@dataclass(frozen=True)
class Resource:
    kind: str
    id: str
    tags: dict[str, str]
    detail: dict[str, Any] = field(default_factory=dict, compare=False)


class Finding(BaseModel):
    """One resource sweep found, and why it is or is not stale; `sweep --format json` lists it
    (its evidence, without the API's detail)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    id: str
    stack: str | None
    role: str | None
    expires_at: str | None
    stale: bool
    orphan: bool = False  # of a stack the Pulumi backend asked does not know
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)


@dataclass(frozen=True)
class Deletion:
    finding: Finding
    error: str | None  # None: deleted
    skipped: str | None = None  # kept after all: still in use


@dataclass(frozen=True)
class Verdict:
    stale: bool
    orphan: bool
    reason: str


def judge(
    tags: Mapping[str, str],
    now: datetime,
    known: set[str] | None = None,
    named: frozenset[str] = frozenset(),
) -> Verdict | None:
    """Stale or kept, and why, for one of ours; None for a resource that is not flashfleet's.

    ``known``: the stacks the Pulumi backend knows (None: not asked, orphans not judged).
    ``named``: stacks the user named explicitly; an orphan of one of them is stale.
    """
    if not is_ours(tags):
        return None
    expires = tags.get(EXPIRES_TAG)
    stack = tags.get(STACK_TAG)
    orphan = known is not None and valid_stack(stack) and stack not in known
    note = f"; the Pulumi backend has no stack {stack}" if orphan else ""
    if orphan and stack in named:
        return Verdict(True, True, f"orphan: stack {stack} named, and the Pulumi backend has no such stack")
    if expires is not None:
        try:
            moment = parse_expiry(expires)
        except ValueError:
            return Verdict(False, orphan, f"kept: unreadable {EXPIRES_TAG} {expires!r}{note}")
        if moment <= now:
            return Verdict(True, orphan, f"expired at {expires}{note}")
    kept = f"kept: expires at {expires}" if expires else f"kept: no {EXPIRES_TAG}"
    if orphan:  # one backend's silence is not evidence: it may be a colleague's live cluster
        return Verdict(
            False, True, f"{kept}{note} (not evidence alone: --orphans --stack {stack} deletes it)"
        )
    if known is not None and stack in named:
        return Verdict(False, False, f"{kept} (the Pulumi backend knows stack {stack}: not an orphan)")
    return Verdict(False, False, kept)


# --- listings -------------------------------------------------------------------------------------


def _pages(client: Any, op: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    if client.can_paginate(op):
        for page in client.get_paginator(op).paginate(**kwargs):
            yield from page.get(key, [])
    else:
        yield from getattr(client, op)(**kwargs).get(key, [])


def _instances(ec2: Any, states: list[str]) -> Iterator[dict[str, Any]]:
    filters = [{"Name": "instance-state-name", "Values": states}]
    for reservation in _pages(ec2, "describe_instances", "Reservations", Filters=filters):
        yield from reservation.get("Instances", [])


def _list_instances(clients: Clients) -> Iterator[Resource]:
    for inst in _instances(clients.ec2, SWEEPABLE_INSTANCE_STATES):
        yield Resource("instance", inst["InstanceId"], tag_map(inst.get("Tags")))


def _simple(op: str, key: str, id_key: str, **kwargs: Any) -> Callable[[Clients], Iterator[Resource]]:
    def items(clients: Clients) -> Iterator[Resource]:
        for item in _pages(clients.ec2, op, key, **kwargs):
            yield Resource(KIND_OF_OP[op], item[id_key], tag_map(item.get("Tags")), item)

    return items


def _list_addresses(clients: Clients) -> Iterator[Resource]:
    for a in clients.ec2.describe_addresses().get("Addresses", []):
        yield Resource("elastic-ip", a["AllocationId"], tag_map(a.get("Tags")), a)


def _list_iam(kind: str) -> Callable[[Clients], Iterator[Resource]]:
    # List calls do not return IAM tags; each item's own get_* does.
    op, key, name_key, get = {
        "instance-profile": ("list_instance_profiles", "InstanceProfiles", "InstanceProfileName", "profile"),
        "iam-role": ("list_roles", "Roles", "RoleName", "role"),
    }[kind]

    def items(clients: Clients) -> Iterator[Resource]:
        iam = clients.iam
        for item in _pages(iam, op, key):
            name = item[name_key]
            if get == "profile":
                full = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
            else:
                full = iam.get_role(RoleName=name)["Role"]
            yield Resource(kind, name, tag_map(full.get("Tags")), full)

    return items


KIND_OF_OP = {
    "describe_launch_templates": "launch-template",
    "describe_placement_groups": "placement-group",
    "describe_security_groups": "security-group",
    "describe_key_pairs": "key-pair",
    "describe_volumes": "volume",
    "describe_snapshots": "snapshot",
    "describe_route_tables": "route-table",
    "describe_internet_gateways": "internet-gateway",
    "describe_subnets": "subnet",
    "describe_vpcs": "vpc",
}

LISTINGS: dict[str, Callable[[Clients], Iterator[Resource]]] = {
    "instance": _list_instances,
    "elastic-ip": _list_addresses,
    "launch-template": _simple("describe_launch_templates", "LaunchTemplates", "LaunchTemplateId"),
    "placement-group": _simple("describe_placement_groups", "PlacementGroups", "GroupName"),
    "security-group": _simple("describe_security_groups", "SecurityGroups", "GroupId"),
    "key-pair": _simple("describe_key_pairs", "KeyPairs", "KeyName"),
    # attached volumes go with their instance (DeleteOnTermination); only loose ones are swept
    "volume": _simple(
        "describe_volumes", "Volumes", "VolumeId", Filters=[{"Name": "status", "Values": ["available"]}]
    ),
    "snapshot": _simple("describe_snapshots", "Snapshots", "SnapshotId", OwnerIds=["self"]),
    "route-table": _simple("describe_route_tables", "RouteTables", "RouteTableId"),
    "internet-gateway": _simple("describe_internet_gateways", "InternetGateways", "InternetGatewayId"),
    "subnet": _simple("describe_subnets", "Subnets", "SubnetId"),
    "vpc": _simple("describe_vpcs", "Vpcs", "VpcId"),
    "instance-profile": _list_iam("instance-profile"),
    "iam-role": _list_iam("iam-role"),
}


@dataclass
class Clients:
    ec2: Any
    iam_factory: Callable[[], Any] | None = None
    ec2_factory: Callable[[str], Any] | None = None  # region -> EC2 client, to see IAM users everywhere
    _iam: Any = None

    def ec2_in(self, region: str) -> Any:
        if region == self.ec2.meta.region_name:
            return self.ec2
        if self.ec2_factory is None:
            raise RuntimeError(f"no EC2 client for region {region}")
        return self.ec2_factory(region)

    @property
    def iam(self) -> Any:
        if self._iam is None:
            if self.iam_factory is None:
                raise RuntimeError("no IAM client")
            self._iam = self.iam_factory()
        return self._iam


def find(
    clients: Clients,
    *,
    now: datetime,
    stacks: Iterable[str] | None = None,
    known: set[str] | None = None,
    kinds: Iterable[str] = KINDS,
    unlisted: dict[str, str] | None = None,
) -> list[Finding]:
    """Every flashfleet resource (of ``stacks`` only, when given), stale or kept, in deletion order.

    ``known``: the stacks a Pulumi backend knows, to judge orphans (see ``judge``); with it, the
    ``stacks`` given are the ones named explicitly.

    A kind that cannot be listed (an API an endpoint lacks, a missing permission) is recorded in
    ``unlisted`` (kind -> error; the caller must fail) and the other kinds are still looked at.
    """
    found: list[Resource] = []
    for kind in kinds:
        try:
            found += list(LISTINGS[kind](clients))
        except Exception as err:
            if unlisted is None:
                raise
            unlisted[kind] = f"{type(err).__name__}: {err}".splitlines()[0]
    only = None if stacks is None else frozenset(stacks)
    out = []
    for res in found:
        t = res.tags
        # a cache outlives its stack by design: its expiry alone says when it is done
        verdict = judge(t, now, None if CACHE_TAG in t else known, only or frozenset())
        if verdict is None or (only is not None and t.get(STACK_TAG) not in only):
            continue
        out.append(
            Finding(
                kind=res.kind,
                id=res.id,
                stack=t.get(STACK_TAG),
                role=t.get(ROLE_TAG),
                expires_at=t.get(EXPIRES_TAG),
                stale=verdict.stale,
                orphan=verdict.orphan,
                reason=verdict.reason,
                detail=res.detail,
            )
        )
    return sorted(out, key=lambda f: (KINDS.index(f.kind), f.id))


# --- what live instances still use --------------------------------------------------------------


@dataclass
class Usage:
    """Ids that a live (not terminated) instance or network interface still uses."""

    security_groups: set[str] = field(default_factory=set)
    subnets: set[str] = field(default_factory=set)
    vpcs: set[str] = field(default_factory=set)
    placement_groups: set[str] = field(default_factory=set)
    key_pairs: set[str] = field(default_factory=set)
    profiles: set[str] = field(default_factory=set)  # instance profile ARNs
    launch_templates: set[str] = field(default_factory=set)
    addresses: set[str] = field(default_factory=set)  # associated Elastic IP allocation ids
    snapshots: set[str] = field(default_factory=set)  # what the account's own AMIs are made of

    @classmethod
    def now(cls, ec2: Any) -> Usage:
        u = cls()
        live: set[str] = set()
        for inst in _instances(ec2, LIVE_INSTANCE_STATES):
            live.add(inst["InstanceId"])
            u.security_groups |= {g["GroupId"] for g in inst.get("SecurityGroups", [])}
            u.subnets |= {inst["SubnetId"]} if inst.get("SubnetId") else set()
            u.vpcs |= {inst["VpcId"]} if inst.get("VpcId") else set()
            if group := inst.get("Placement", {}).get("GroupName"):
                u.placement_groups.add(group)
            if key := inst.get("KeyName"):
                u.key_pairs.add(key)
            if profile := inst.get("IamInstanceProfile", {}).get("Arn"):
                u.profiles.add(profile)
            if template := tag_map(inst.get("Tags")).get("aws:ec2launchtemplate:id"):
                u.launch_templates.add(template)
        enis: set[str] = set()
        for eni in _pages(ec2, "describe_network_interfaces", "NetworkInterfaces"):
            owner = eni.get("Attachment", {}).get("InstanceId")
            if owner is not None and owner not in live:
                continue  # the interface of a terminated instance, on its way out
            enis.add(eni["NetworkInterfaceId"])
            u.security_groups |= {g["GroupId"] for g in eni.get("Groups", [])}
            u.subnets |= {eni["SubnetId"]} if eni.get("SubnetId") else set()
            u.vpcs |= {eni["VpcId"]} if eni.get("VpcId") else set()
        # read again: terminating an instance releases its address's association
        for a in ec2.describe_addresses()["Addresses"]:
            if a.get("InstanceId") in live or (
                not a.get("InstanceId") and a.get("NetworkInterfaceId") in enis
            ):
                u.addresses.add(a["AllocationId"])
        return u

    def user_of(self, f: Finding, profiles_by_role: Mapping[str, set[str]]) -> str | None:
        """Why ``f`` is still in use, or None."""
        d = f.detail
        checks: dict[str, Callable[[], str | None]] = {
            "elastic-ip": lambda: "associated with a live interface" if f.id in self.addresses else None,
            "launch-template": lambda: (
                "a live instance was launched from it" if f.id in self.launch_templates else None
            ),
            "placement-group": lambda: "a live instance is in it" if f.id in self.placement_groups else None,
            "security-group": lambda: (
                "a live instance or interface uses it" if f.id in self.security_groups else None
            ),
            "key-pair": lambda: "a live instance uses it" if f.id in self.key_pairs else None,
            "snapshot": lambda: "an AMI of the account is made of it" if f.id in self.snapshots else None,
            "route-table": lambda: self._vpc_user(d.get("VpcId")),
            "internet-gateway": lambda: next(
                (u for a in d.get("Attachments", []) if (u := self._vpc_user(a.get("VpcId")))), None
            ),
            "subnet": lambda: "a live instance or interface is in it" if f.id in self.subnets else None,
            "vpc": lambda: self._vpc_user(f.id),
            "instance-profile": lambda: "a live instance uses it" if d.get("Arn") in self.profiles else None,
            "iam-role": lambda: (
                "a live instance uses its instance profile"
                if profiles_by_role.get(f.id, set()) & self.profiles
                else None
            ),
        }
        check = checks.get(f.kind)
        return check() if check else None

    def _vpc_user(self, vpc: str | None) -> str | None:
        return f"a live instance or interface is in {vpc}" if vpc in self.vpcs else None


def snapshots_in_images(ec2: Any) -> set[str]:
    """The snapshots the account's own AMIs are made of: EC2 refuses to delete those."""
    return {
        m["Ebs"]["SnapshotId"]
        for image in _pages(ec2, "describe_images", "Images", Owners=["self"])
        for m in image.get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("SnapshotId")
    }


def profiles_in_use_everywhere(clients: Clients) -> set[str]:
    """ARNs of the instance profiles live instances use in every region the account has enabled
    (IAM is global). Raises when the regions, or any one region's instances, cannot be listed."""
    regions = {r["RegionName"] for r in clients.ec2.describe_regions()["Regions"]}
    regions.add(clients.ec2.meta.region_name)
    used: set[str] = set()
    for region in sorted(regions):
        try:
            for inst in _instances(clients.ec2_in(region), LIVE_INSTANCE_STATES):
                if arn := inst.get("IamInstanceProfile", {}).get("Arn"):
                    used.add(arn)
        except Exception as err:
            raise RuntimeError(
                f"the instances of region {region} could not be listed ({_error(err)})"
            ) from None
    return used


# --- deletion -----------------------------------------------------------------------------------


class Kept(Exception):
    """Deleting it would take it from something else that still holds it: kept, with why."""


def _delete_one(clients: Clients, f: Finding) -> None:
    ec2, d = clients.ec2, f.detail
    if f.kind == "elastic-ip":
        if d.get("AssociationId"):  # left on an instance that is gone
            ec2.disassociate_address(AssociationId=d["AssociationId"])
        ec2.release_address(AllocationId=f.id)
    elif f.kind == "launch-template":
        ec2.delete_launch_template(LaunchTemplateId=f.id)
    elif f.kind == "placement-group":
        ec2.delete_placement_group(GroupName=f.id)
    elif f.kind == "security-group":
        ec2.delete_security_group(GroupId=f.id)
    elif f.kind == "key-pair":
        ec2.delete_key_pair(KeyName=f.id)
    elif f.kind == "volume":
        ec2.delete_volume(VolumeId=f.id)
    elif f.kind == "snapshot":
        ec2.delete_snapshot(SnapshotId=f.id)
    elif f.kind == "route-table":
        for assoc in d.get("Associations", []):
            if assoc.get("Main"):
                raise RuntimeError("the VPC's main route table goes with its VPC")
            ec2.disassociate_route_table(AssociationId=assoc["RouteTableAssociationId"])
        ec2.delete_route_table(RouteTableId=f.id)
    elif f.kind == "internet-gateway":
        for attachment in d.get("Attachments", []):
            ec2.detach_internet_gateway(InternetGatewayId=f.id, VpcId=attachment["VpcId"])
        ec2.delete_internet_gateway(InternetGatewayId=f.id)
    elif f.kind == "subnet":
        ec2.delete_subnet(SubnetId=f.id)
    elif f.kind == "vpc":
        ec2.delete_vpc(VpcId=f.id)
    elif f.kind == "instance-profile":
        _delete_profile(clients.iam, f.id)
    elif f.kind == "iam-role":
        _delete_role(clients.iam, f.id)
    else:
        raise ValueError(f"no deletion for {f.kind}")


def _delete_profile(iam: Any, name: str) -> None:
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]  # as it is now
    roles = [r["RoleName"] for r in profile.get("Roles", [])]
    if roles and not fully_ours(tag_map(profile.get("Tags"))):
        raise Kept(
            f"it holds {', '.join(roles)}, and only a profile tagged with both {STACK_TAG} and "
            f"{EXPIRES_TAG} is emptied"
        )
    for role in roles:
        iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role)
    iam.delete_instance_profile(InstanceProfileName=name)


def _delete_role(iam: Any, name: str) -> None:
    # first, before any policy is taken from it: a role some profile still holds stays whole
    holders = [
        p["InstanceProfileName"]
        for p in _pages(iam, "list_instance_profiles_for_role", "InstanceProfiles", RoleName=name)
    ]
    if holders:
        raise Kept(f"instance profile {', '.join(sorted(holders))} still holds it")
    for p in _pages(iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name):
        iam.detach_role_policy(RoleName=name, PolicyArn=p["PolicyArn"])
    for policy in _pages(iam, "list_role_policies", "PolicyNames", RoleName=name):
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    iam.delete_role(RoleName=name)


def _error(err: Exception) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _profiles_by_role(clients: Clients, kinds: set[str]) -> dict[str, set[str]]:
    if "iam-role" not in kinds:
        return {}
    out: dict[str, set[str]] = {}
    for profile in _pages(clients.iam, "list_instance_profiles", "InstanceProfiles"):
        for role in profile.get("Roles", []):
            out.setdefault(role["RoleName"], set()).add(profile["Arn"])
    return out


def delete(
    clients: Clients, findings: Iterable[Finding], *, wait_delay_s: int = 10, wait_attempts: int = 60
) -> list[Deletion]:
    """Delete the stale findings; one failure does not stop the rest (each is reported).

    Instances are terminated one call each (a protected one fails alone) and waited for; then
    whatever a live instance still uses is kept, the rest deleted in dependency order.
    """
    stale = [f for f in findings if f.stale]
    done: list[Deletion] = []
    terminated: list[Finding] = []
    for f in (f for f in stale if f.kind == "instance"):
        try:
            clients.ec2.terminate_instances(InstanceIds=[f.id])
            terminated.append(f)
        except Exception as err:
            done.append(Deletion(f, _error(err)))
    if terminated:
        ids = [f.id for f in terminated]
        try:
            # security groups, subnets and placement groups stay in use until the instances are gone
            clients.ec2.get_waiter("instance_terminated").wait(
                InstanceIds=ids, WaiterConfig={"Delay": wait_delay_s, "MaxAttempts": wait_attempts}
            )
            done += [Deletion(f, None) for f in terminated]
        except Exception as err:
            done += [Deletion(f, f"terminating, not confirmed: {_error(err)}") for f in terminated]
    rest = [f for f in stale if f.kind != "instance"]
    if not rest:
        return done
    try:
        usage = Usage.now(clients.ec2)
        if any(f.kind == "snapshot" for f in rest):
            usage.snapshots = snapshots_in_images(clients.ec2)
    except Exception as err:  # without knowing what is in use, nothing else may go
        return done + [Deletion(f, f"could not tell whether it is in use: {_error(err)}") for f in rest]
    by_role: dict[str, set[str]] = {}
    iam_unknown = None
    if any(f.kind in IAM_KINDS for f in rest):
        try:  # IAM is global: its users may run in any region, not only the one swept
            usage.profiles |= profiles_in_use_everywhere(clients)
            by_role = _profiles_by_role(clients, {f.kind for f in rest})
        except Exception as err:
            iam_unknown = f"could not tell whether it is in use: {_error(err)}"
    for f in rest:
        if iam_unknown is not None and f.kind in IAM_KINDS:
            done.append(Deletion(f, iam_unknown))
            continue
        if (user := usage.user_of(f, by_role)) is not None:
            done.append(Deletion(f, None, skipped=f"kept: in use ({user})"))
            continue
        try:
            _delete_one(clients, f)
            done.append(Deletion(f, None))
        except Kept as why:
            done.append(Deletion(f, None, skipped=f"kept: {why}"))
        except Exception as err:
            done.append(Deletion(f, _error(err)))
    return done


# --- clients and the Pulumi backend ---------------------------------------------------------------


class NoAccount(Exception):
    """No credentials or no region: nothing can be listed (one line, not one per kind)."""


def check_account(region: str | None) -> None:
    """Refuse before any call what every call would fail on."""
    if not has_credentials():
        raise NoAccount(f"{NO_CREDENTIALS}: nothing was listed")
    import boto3

    session = boto3.Session(region_name=region)
    if session.region_name is None:
        raise NoAccount(
            "--region: no region (pass --region R, set AWS_REGION, or name a --stack that sets one)"
        )


def clients(region: str | None = None) -> Clients:
    """EC2 now, IAM when an IAM kind is looked at, EC2 of other regions to see IAM's users;
    standard settings."""
    return Clients(
        ec2=ec2_client(region), iam_factory=lambda: aws_client("iam", region), ec2_factory=ec2_client
    )


def backend_stacks(work_dir: str = ".") -> set[str]:
    """The stacks of this project the Pulumi backend in use knows (the Pulumi CLI's login or
    PULUMI_BACKEND_URL). It may know none (a per-user backend): its silence deletes nothing
    by itself, see ``judge``."""
    try:
        from pulumi import automation as auto

        workspace = auto.LocalWorkspace(work_dir=work_dir)
        return {s.name.rsplit("/", 1)[-1] for s in workspace.list_stacks()}
    except Exception as err:
        raise BackendUnavailable(f"no Pulumi backend answered ({_error(err)})") from None
