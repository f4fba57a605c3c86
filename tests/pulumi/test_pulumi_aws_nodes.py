"""Mock tests of the AWS node source for every AWS catalog stack."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from pulumi_harness import (
    AMI,
    API_NETWORK_CARDS,
    BLOCK_END,
    HOST_KEYS,
    NOW,
    Result,
    console_key,
    run_program,
)

from flashfleet.bringup.contract import check_inventory
from flashfleet.bringup.playbook_run import pin_host_keys
from flashfleet.catalog.instances import instance_catalog
from flashfleet.components.aws_host_keys import HOST_KEYS_TIMEOUT_S
from flashfleet.components.tags import EXPIRES_TAG
from flashfleet.planning import StackPlan, load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR, AwsSource, list_stacks
from flashfleet.stack.capacity_block import block, node_deadline

AWS_STACKS = [s for s in list_stacks() if load_stack(s).spec.nodes.source.kind == "aws"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
TAGGABLE_SKIP = {
    "aws:iam/rolePolicy:RolePolicy",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
}
# The playbook run is a dynamic resource on the controller, not a cloud resource: no tags.
PLAYBOOK_RUN = "pulumi-python:dynamic/flashfleet:PlaybookRun"

_cache: dict[str, Result] = {}


def program(stack: str) -> Result:
    if stack not in _cache:
        _cache[stack] = run_program(stack)
    return _cache[stack]


def test_the_aws_catalog_is_covered() -> None:
    assert len(AWS_STACKS) == 10
    assert {"gb300-lowlat", "h200-l3", "gb300-pd", "h200-replicas", "gb300-2p1d"} <= set(AWS_STACKS)


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_instances_type_and_count(stack: str) -> None:
    r = program(stack)
    instances = r.mocks.of_type(INSTANCE)
    assert len(instances) == len(r.bringup.nodes) == r.bringup.spec.nodes.count
    lt = r.mocks.one(LT)
    expected = {"gb300": "p6e-gb300.36xlarge", "h200": "p5en.48xlarge"}[r.bringup.spec.hardware]
    assert lt.inputs["instanceType"] == expected
    assert all(i.inputs["launchTemplate"]["id"] == f"{stack}-template-id" for i in instances)
    assert lt.inputs["imageId"] == AMI


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_dlami_for_the_architecture(stack: str) -> None:
    r = program(stack)
    names = [a["name"] for tok, a in r.mocks.calls if tok == "aws:ssm/getParameter:getParameter"]
    arch = {"gb300": "arm64", "h200": "x86_64"}[r.bringup.spec.hardware]
    assert names == [
        f"/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
    ]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_one_efa_interface_per_network_card(stack: str) -> None:
    r = program(stack)
    nics = r.mocks.one(LT).inputs["networkInterfaces"]
    known = instance_catalog()[r.bringup.instance.name].efa_network_cards  # type: ignore[union-attr]
    cards = known if known is not None else API_NETWORK_CARDS  # unknown: asked from EC2
    assert len(nics) == cards
    assert sorted(int(n["networkCardIndex"]) for n in nics) == list(range(cards))
    primary = next(n for n in nics if int(n["networkCardIndex"]) == 0)
    assert (primary["interfaceType"], int(primary["deviceIndex"])) == ("efa", 0)
    assert all(n["interfaceType"] == "efa-only" for n in nics if n is not primary)
    assert all(n["securityGroups"] == [f"{stack}-sg-id"] for n in nics)
    asked = [a for tok, a in r.mocks.calls if tok == "aws:ec2/getInstanceType:getInstanceType"]
    assert bool(asked) == (known is None)


def test_p5en_has_sixteen_efa_interfaces() -> None:
    assert len(program("h200-lowlat").mocks.one(LT).inputs["networkInterfaces"]) == 16


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_placement_group_and_capacity(stack: str) -> None:
    r = program(stack)
    src = r.bringup.spec.nodes.source
    assert isinstance(src, AwsSource)
    lt = r.mocks.one(LT).inputs
    groups = r.mocks.of_type("aws:ec2/placementGroup:PlacementGroup")
    if src.capacity.kind == "block":
        assert groups == []
        assert "placement" not in lt
        assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
        target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == src.capacity.reservation_id
    else:
        assert [g.inputs["strategy"] for g in groups] == ["cluster"]
        assert lt["placement"]["groupName"] == f"{stack}-placement"
        assert "instanceMarketOptions" not in lt


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_security_group_rules(stack: str) -> None:
    r = program(stack)
    src = r.bringup.spec.nodes.source
    assert isinstance(src, AwsSource)
    ingress = [x.inputs for x in r.mocks.of_type(INGRESS)]
    from_cidrs = [x for x in ingress if "cidrIpv4" in x]
    assert {(x["cidrIpv4"], int(x["fromPort"]), int(x["toPort"]), x["ipProtocol"]) for x in from_cidrs} == {
        (str(c), p, p, "tcp") for c in src.allowed_cidrs for p in (22, 30000)
    }
    assert not any(x["cidrIpv4"] == "0.0.0.0/0" for x in from_cidrs), "no public ingress by default"
    within = [x for x in ingress if "referencedSecurityGroupId" in x]
    assert within == [
        {
            "securityGroupId": f"{stack}-sg-id",
            "referencedSecurityGroupId": f"{stack}-sg-id",
            "ipProtocol": "-1",
            "tags": within[0]["tags"],
        }
    ]
    egress = {
        (x.inputs.get("cidrIpv4"), x.inputs.get("referencedSecurityGroupId")) for x in r.mocks.of_type(EGRESS)
    }
    assert egress == {("0.0.0.0/0", None), (None, f"{stack}-sg-id")}


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_imdsv2_encryption_and_instance_profile(stack: str) -> None:
    r = program(stack)
    lt = r.mocks.one(LT).inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["instanceMetadataTags"] == "enabled"
    (root,) = lt["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] == "true"
    assert int(root["ebs"]["volumeSize"]) == r.bringup.root_volume_gib >= 306  # 328 GB of weights
    assert lt["iamInstanceProfile"]["arn"].endswith(f"{stack}-profile")
    # Least privilege: Session Manager's own actions inline, no managed policy (issue 14:
    # AmazonSSMManagedInstanceCore granted ssm:GetParameter* on *), IMDS one hop away.
    assert r.mocks.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") == []
    policy = json.loads(r.mocks.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow"
    assert set(statement["Action"]) == {
        "ssm:UpdateInstanceInformation",
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    }
    assert not any(a.startswith("ssm:Get") or "*" in a for a in statement["Action"])
    assert int(lt["metadataOptions"]["httpPutResponseHopLimit"]) == 1
    assert "ec2.amazonaws.com" in r.mocks.one("aws:iam/role:Role").inputs["assumeRolePolicy"]
    assert "keyName" not in lt  # no key pair unless the stack names one


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_tags_and_deadline(stack: str) -> None:
    r = program(stack)
    # Block stacks (`ttl: block`) end 30 min before their block does; the others after their TTL.
    end = BLOCK_END if block(r.bringup.spec) is not None else None
    deadline = node_deadline(r.bringup.spec, NOW, end).strftime("%Y-%m-%dT%H:%M:%SZ")
    if end is not None:
        assert deadline == "2026-11-30T11:00:00Z"
    assert r.outputs["expiresAt"] == deadline
    # by name: the mocks record registrations as each one's inputs resolve, in no fixed order
    instances = {x.name: x for x in r.mocks.of_type(INSTANCE)}
    for i, node in enumerate(r.bringup.nodes):
        tags = instances[f"{stack}-node-{i}"].inputs["tags"]
        assert tags["flashfleet:stack"] == stack
        assert tags[EXPIRES_TAG] == deadline
        assert tags["flashfleet:role"] == node.role
    for res in r.mocks.resources:
        if res.custom and res.typ not in TAGGABLE_SKIP and res.typ not in (PLAYBOOK_RUN, HOST_KEYS):
            assert res.inputs["tags"]["flashfleet:stack"] == stack, res.name
            assert res.inputs["tags"][EXPIRES_TAG] == deadline, res.name
            assert res.inputs["tags"]["flashfleet:managed-by"] == "flashfleet", res.name
    # The launch template's tags for new instances stay static (no new version per `up`).
    for spec in r.mocks.one(LT).inputs["tagSpecifications"]:
        assert EXPIRES_TAG not in spec["tags"]
        assert spec["tags"] == {"flashfleet:managed-by": "flashfleet", "flashfleet:stack": stack}


def test_ttl_tag_is_iso_utc_eight_hours_on() -> None:
    assert program("h200-lowlat").outputs["expiresAt"] == "2026-11-29T18:00:00Z"


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_ttl_guard_terminates_the_node_itself(stack: str) -> None:
    lt = program(stack).mocks.one(LT).inputs
    assert lt["instanceInitiatedShutdownBehavior"] == "terminate"
    script = base64.b64decode(lt["userData"]).decode()
    assert "/latest/meta-data/tags/instance/{EXPIRES_TAG}" in script
    assert "EXPIRES_TAG = 'flashfleet:expires-at'" in script  # rendered from components.tags
    assert len(script.encode()) <= 16384  # EC2's user-data limit (before base64)
    assert "X-aws-ec2-metadata-token" in script  # IMDSv2
    assert "shutdown -h now" in script
    assert "systemctl enable --now flashfleet-ttl-guard.timer" in script
    assert "OnUnitActiveSec=5min" in script
    # the fallback deadline (launch + ttl) when no tag is ever readable; `ttl: block` stacks end
    # with their block, the longest ttl backs them up
    ttl = program(stack).bringup.spec.ttl
    seconds = int(ttl.total_seconds()) if isinstance(ttl, timedelta) else 14 * 86400
    assert f"echo {seconds} > /var/lib/flashfleet/ttl-seconds" in script
    # the cap on any deadline (launch + this): the longest ttl, or for `ttl: block` the longest
    # Capacity Block EC2 sells (its nodes cannot launch before the block starts)
    cap = 14 * 86400 if isinstance(ttl, timedelta) else 182 * 86400
    assert f"\nMAX_LIFE_S = {cap}\n" in script


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_no_duplicate_resource_names(stack: str) -> None:
    r = program(stack)
    dupes = [k for k, n in Counter((x.typ, x.name) for x in r.mocks.resources).items() if n > 1]
    assert dupes == []
    assert sum(1 for x in r.mocks.resources if x.typ == "flashfleet:nodes:AwsNodes") == 1


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_public_addresses_and_endpoint(stack: str) -> None:
    r = program(stack)
    instances = {x.name: x.outputs for x in r.mocks.of_type(INSTANCE)}
    eips = {x.name: x for x in r.mocks.of_type("aws:ec2/eip:Eip")}
    assert len(eips) == len(instances) == len(r.bringup.nodes)
    for i in range(len(r.bringup.nodes)):
        node, eip = instances[f"{stack}-node-{i}"], eips[f"{stack}-node-{i}-ip"]
        # Each node's Elastic IP sits on that node's primary (card 0) interface.
        assert eip.inputs["networkInterface"] == node["primaryNetworkInterfaceId"]
        assert r.outputs["addresses"][i] == eip.outputs["publicIp"]
        assert r.outputs["privateAddresses"][i] == node["privateIp"]
    assert r.outputs["endpoint"] == f"http://{r.outputs['addresses'][0]}:30000/v1"


def test_new_network_is_built_in_the_stack_zone() -> None:
    r = program("h200-lowlat")
    assert r.mocks.one("aws:ec2/vpc:Vpc").inputs["cidrBlock"] == "10.42.0.0/16"
    subnet = r.mocks.one("aws:ec2/subnet:Subnet").inputs
    assert (subnet["availabilityZone"], subnet["cidrBlock"]) == ("us-east-2a", "10.42.0.0/20")
    (route,) = r.mocks.one("aws:ec2/routeTable:RouteTable").inputs["routes"]
    assert route == {
        "cidrBlock": "0.0.0.0/0",
        "gatewayId": "h200-l3-igw-id".replace("h200-l3", "h200-lowlat"),
    }


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_instance_ids_are_an_output_in_node_order(stack: str) -> None:
    """For pinning host keys: each address is matched with the console of its own instance."""
    r = program(stack)
    names = {x.name for x in r.mocks.of_type(INSTANCE)}
    expected = [f"{stack}-node-{i}" for i in range(len(r.bringup.nodes))]
    assert set(expected) == names
    assert r.outputs["instanceIds"] == [f"{name}-id" for name in expected]  # the mocks' id scheme


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_host_keys_are_read_per_instance_and_pinned_in_the_inventory(stack: str, tmp_path: Path) -> None:
    """Issue 14: each node's keys come from its own instance's console, reach its host as
    `flashfleet_host_keys` (the fact existing hosts' `hostKeys` become) and are pinned by the
    run: one path for both sources."""
    r = program(stack)
    reader = r.mocks.one(HOST_KEYS)
    ids = r.outputs["instanceIds"]
    assert reader.inputs["instanceIds"] == ids
    assert reader.inputs["nodes"] == [n.name for n in r.bringup.nodes]
    assert reader.inputs["region"] == r.bringup.region
    assert reader.inputs["timeoutS"] == HOST_KEYS_TIMEOUT_S
    hosts = r.outputs["inventory"]["all"]["hosts"]
    assert [h["flashfleet_host_keys"] for h in hosts.values()] == [[console_key(i)] for i in ids]
    check_inventory(r.outputs["inventory"])  # the hand-off's own check accepts them
    pinned = pin_host_keys(r.outputs["inventory"], tmp_path / "known_hosts")
    lines = (tmp_path / "known_hosts").read_text().splitlines()
    assert lines == [f"{addr} {console_key(i)}" for addr, i in zip(r.outputs["addresses"], ids, strict=True)]
    for h in pinned["all"]["hosts"].values():
        assert "-o StrictHostKeyChecking=yes" in h["ansible_ssh_common_args"]
        assert f"-o UserKnownHostsFile={tmp_path / 'known_hosts'}" in h["ansible_ssh_common_args"]


_KEYLESS = """
import sys
sys.path.insert(0, sys.argv[1])
import pulumi
from pulumi_harness import run_program, Recorder
seen = []
real = Recorder.new_resource
def record(self, args):
    seen.append(args.typ)
    return real(self, args)
Recorder.new_resource = record
try:
    run_program("h200-l3", keyless={"h200-l3-node-1"})
except pulumi.RunError as err:
    print("RunError", str(err).replace(chr(10), "<newline>"))
print("PlaybookRun" in " ".join(seen))
"""


def test_a_node_whose_keys_were_not_read_stops_the_bringup_naming_it() -> None:
    # In a child interpreter: an exception out of a mocked program's apply leaves this
    # CPython 3.11 in a state where a later ast.parse raises SystemError (at session end).
    out = subprocess.run(
        [sys.executable, "-c", _KEYLESS, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    kind, _, line = out[-2].partition(" ")
    assert kind == "RunError"
    assert "<newline>" not in line
    assert line.startswith(
        "no SSH host keys for h200-l3-node-1 (h200-l3-node-1-id: no host-key block on the console yet after"
    ), line
    assert "h200-l3-node-0" not in line
    assert "ec2:GetConsoleOutput" in line
    assert out[-1] == "False"  # no playbook run: nothing reaches an unpinned node


def test_existing_hosts_read_no_console() -> None:
    r = program("mi355x-agentx")
    assert not r.mocks.of_type(HOST_KEYS)


def _router_instance_plan(tmp_path: Path) -> StackPlan:
    """h200-replicas with its router on an m7i.xlarge of its own (us-east-1, where it is priced)."""
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / "Pulumi.h200-replicas.yaml").read_text())
    doc["config"]["aws:region"] = "us-east-1"
    s = doc["config"]["flashfleet:stack"]
    s["cluster"]["router"]["instanceType"] = "m7i.xlarge"
    s["nodes"]["count"] = 3
    s["nodes"]["source"]["network"]["availabilityZone"] = "us-east-1a"
    (tmp_path / "Pulumi.h200-replicas.yaml").write_text(yaml.safe_dump(doc))
    return load_stack("h200-replicas", tmp_path)


def test_a_router_instance_is_a_plain_cpu_node_beside_the_gpu_nodes(tmp_path: Path) -> None:
    stack = "h200-replicas"
    r = run_program(stack, plan=_router_instance_plan(tmp_path))
    templates = {x.name: x for x in r.mocks.of_type(LT)}
    assert set(templates) == {f"{stack}-template", f"{stack}-router-template"}
    gpu_lt, router_lt = templates[f"{stack}-template"], templates[f"{stack}-router-template"]
    # The GPU nodes keep their template: EFA on every card, the placement group.
    assert gpu_lt.inputs["instanceType"] == "p5en.48xlarge"
    assert len(gpu_lt.inputs["networkInterfaces"]) == 16
    assert gpu_lt.inputs["placement"]["groupName"] == f"{stack}-placement"
    # The router's: one ordinary interface in the same subnet and group, plain Ubuntu of the
    # stack's arch, a volume for the image only, and nothing of the GPU nodes' capacity.
    lt = router_lt.inputs
    assert lt["instanceType"] == "m7i.xlarge"
    (nic,) = lt["networkInterfaces"]
    assert "interfaceType" not in nic
    assert nic["securityGroups"] == [f"{stack}-sg-id"]
    assert nic["subnetId"] == gpu_lt.inputs["networkInterfaces"][0]["subnetId"]
    assert not {"placement", "instanceMarketOptions", "capacityReservationSpecification"} & set(lt)
    assert int(lt["blockDeviceMappings"][0]["ebs"]["volumeSize"]) == 187
    names = [a["name"] for tok, a in r.mocks.calls if tok == "aws:ssm/getParameter:getParameter"]
    assert sorted(names) == [
        "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
        "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
    ]
    # What every node has, the router's too: IMDSv2, encryption, the role, the TTL guard, static tags.
    for key in ("metadataOptions", "iamInstanceProfile", "userData", "tagSpecifications"):
        assert lt[key] == gpu_lt.inputs[key], key
    assert lt["instanceInitiatedShutdownBehavior"] == "terminate"
    assert lt["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
    instances = {x.name: x.inputs for x in r.mocks.of_type(INSTANCE)}
    assert [instances[f"{stack}-node-{i}"]["launchTemplate"]["id"] for i in range(3)] == [
        f"{stack}-template-id",
        f"{stack}-template-id",
        f"{stack}-router-template-id",
    ]
    assert instances[f"{stack}-node-2"]["tags"]["flashfleet:role"] == "router"
    assert instances[f"{stack}-node-2"]["tags"][EXPIRES_TAG] == r.outputs["expiresAt"]
    # The endpoint is the router's node; its host keys are read like the others'; the
    # inventory gives it no GPU stack.
    assert r.outputs["endpoint"] == f"http://{r.outputs['addresses'][2]}:30000/v1"
    assert r.mocks.one(HOST_KEYS).inputs["nodes"] == [f"{stack}-node-{i}" for i in range(3)]
    hosts = r.outputs["inventory"]["all"]["hosts"]
    assert [hosts[f"{stack}-node-{i}"]["flashfleet_gpu_node"] for i in range(3)] == [True, True, False]
    check_inventory(r.outputs["inventory"])


def test_the_lock_s_amis_are_booted_without_asking_ssm_and_only_in_their_region(tmp_path: Path) -> None:
    """A lock holding the AMI ids the SSM parameters named (flashfleet lock): the GPU nodes and the
    router boot exactly those ids, and the program asks SSM for nothing. Ids locked in another
    region are not this region's images: the parameters are read again."""
    from dataclasses import replace

    from flashfleet.planning.node_images import dlami_parameter, ubuntu_parameter
    from flashfleet.stack.lock import LockedAmi, LockedFile, LockedRepo, StackLock

    stack = "h200-replicas"
    plan = _router_instance_plan(tmp_path)
    gpu_ami, router_ami = "ami-0aaaaaaaaaaaaaaa1", "ami-0bbbbbbbbbbbbbbb2"

    def locked(region: str) -> StackLock:
        repo = LockedRepo(revision="main", commit="c" * 40, files={"a": LockedFile(size=1, git_oid="d" * 40)})
        amis = {
            dlami_parameter("x86_64", "ubuntu-24.04"): LockedAmi(region=region, ami=gpu_ami),
            ubuntu_parameter("x86_64", "ubuntu-24.04"): LockedAmi(region=region, ami=router_ami),
        }
        return StackLock(stack=stack, locked_on="2026-12-06", weights={"m/m": repo}, amis=amis)

    r = run_program(stack, plan=replace(plan, lock=locked("us-east-1")))
    templates = {x.name: x.inputs for x in r.mocks.of_type(LT)}
    assert templates[f"{stack}-template"]["imageId"] == gpu_ami
    assert templates[f"{stack}-router-template"]["imageId"] == router_ami
    assert not [a for tok, a in r.mocks.calls if tok == "aws:ssm/getParameter:getParameter"]

    elsewhere = run_program(stack, plan=replace(plan, lock=locked("us-east-2")))
    templates = {x.name: x.inputs for x in elsewhere.mocks.of_type(LT)}
    assert templates[f"{stack}-template"]["imageId"] == AMI  # what SSM names now (the mocks')
    assert len([a for tok, a in elsewhere.mocks.calls if tok == "aws:ssm/getParameter:getParameter"]) == 2
