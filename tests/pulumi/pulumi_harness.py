"""Run the Pulumi program under mocks and record every registration (no CLI, no engine).

``run_program`` returns what a real ``pulumi up`` would record: each resource's type, name and
inputs (secrets still wrapped, as the engine sees them) and the stack outputs with their
secretness. Mocks do not detect duplicate URNs, so the recorder keeps every registration.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pulumi
from pulumi.runtime import rpc

from flashfleet.components.program import deploy
from flashfleet.planning import StackPlan, load_stack
from flashfleet.stack.capacity_block import block

NOW = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
# The end of a block stack's Capacity Block, as the pre-flight check reads it from EC2.
BLOCK_END = datetime(2026, 11, 30, 11, 30, 0, tzinfo=UTC)
TOKEN = "hf_tok3nTHATmustNEVERleak0123456789"
AMI = "ami-0123456789abcdef0"
# What the EC2 API would answer for a type the catalog does not know (GB300's cards).
API_NETWORK_CARDS = 5
HOST_KEYS = "pulumi-python:dynamic/flashfleet:HostKeys"
PLAYBOOK_RUN = "pulumi-python:dynamic/flashfleet:PlaybookRun"


def console_key(instance_id: str) -> str:
    """The host key the HostKeys provider would read from an instance's console (a well-formed
    ed25519 blob, distinct per instance)."""
    import base64

    raw = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + instance_id.encode().ljust(32, b"\x00")[:32]
    return "ssh-ed25519 " + base64.b64encode(raw).decode()


@dataclass
class Registration:
    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    outputs: dict[str, Any] = field(default_factory=dict)
    provider: str | None = None  # the explicit provider reference, if any


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[Registration] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # nodes whose consoles show no host keys (the HostKeys provider records them as missing)
    keyless: set[str] = field(default_factory=set)
    # the account's completed cache snapshots of the asked key, newest first (EC2's order)
    snapshots: list[str] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        out = dict(args.inputs)
        self.resources.append(
            Registration(args.typ, args.name, dict(args.inputs), args.custom, out, args.provider)
        )
        n = sum(1 for r in self.resources if r.typ == args.typ)
        if args.typ == "aws:ec2/instance:Instance":
            out.update(privateIp=f"10.42.0.{10 + n}", primaryNetworkInterfaceId=f"eni-{n:017x}")
        elif args.typ == "aws:ec2/eip:Eip":
            out.update(publicIp=f"198.51.100.{10 + n}")
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out.update(latestVersion=1)
        elif args.typ.startswith("aws:iam/"):
            out.update(arn=f"arn:aws:iam::123456789012:{args.name}", name=args.name)
        elif args.typ == "aws:ec2/placementGroup:PlacementGroup":
            out.update(name=args.name)
        elif args.typ == PLAYBOOK_RUN:  # what the provider's create records: its run directory
            out.update(runDir=f"runs/{n:03d}-{args.inputs.get('playbook')}")
        elif args.typ == HOST_KEYS:  # what the provider's create records (no EC2 under mocks)
            nodes, ids = args.inputs["nodes"], args.inputs["instanceIds"]
            out.update(
                keys=[[] if n in self.keyless else [console_key(i)] for n, i in zip(nodes, ids, strict=True)],
                missing=[
                    f"{n} ({i}: no host-key block on the console yet after 1200 s)"
                    for n, i in zip(nodes, ids, strict=True)
                    if n in self.keyless
                ],
            )
        return (f"{args.name}-id" if args.custom else None), out

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":
            return {"name": args.args["name"], "value": AMI, "type": "String"}, []
        if args.token == "aws:ec2/getInstanceType:getInstanceType":
            return {"instanceType": args.args["instanceType"], "maximumNetworkCards": API_NETWORK_CARDS}, []
        if args.token == "aws:ebs/getSnapshotIds:getSnapshotIds":
            return {"ids": list(self.snapshots), "id": "snapshot-ids"}, []
        raise AssertionError(f"unexpected invoke {args.token}")

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.resources if r.typ == typ]

    def one(self, typ: str) -> Registration:
        found = self.of_type(typ)
        assert len(found) == 1, f"{typ}: {len(found)} registered"
        return found[0]


@dataclass
class Result:
    bringup: StackPlan
    mocks: Recorder
    outputs: dict[str, Any]
    secret: dict[str, bool]


def run_program(
    stack: str,
    *,
    token: str | None = TOKEN,
    keyless: set[str] | None = None,
    plan: StackPlan | None = None,
    snapshots: list[str] | None = None,
) -> Result:
    """`plan`: a stack resolved elsewhere (a stack file of another folder) instead of the catalog's."""
    mocks = Recorder(keyless=keyless or set(), snapshots=snapshots or [])
    pulumi.runtime.set_mocks(mocks, project="flashfleet", stack=stack, preview=False)
    bringup = plan or load_stack(stack)
    values: dict[str, Any] = {}
    secret: dict[str, bool] = {}

    @pulumi.runtime.test
    def program() -> Any:
        end = BLOCK_END if block(bringup.spec) is not None else None
        exports = deploy(bringup, pulumi.Output.secret(token) if token else None, NOW, end, bringup.site_args)

        async def collect() -> None:
            for key, value in exports.items():
                out = pulumi.Output.from_input(value)
                values[key] = await out.future()
                secret[key] = await out.is_secret()

        return asyncio.ensure_future(collect())

    program()
    return Result(bringup, mocks, values, secret)


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def plain_strings(value: Any) -> list[str]:
    """Every string in value that is NOT inside a secret."""
    if is_secret(value):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*plain_strings(k), *plain_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in plain_strings(v)]
    return []


def token_leaks(mocks: Recorder, outputs: dict[str, Any], secret: dict[str, bool], token: str) -> list[str]:
    """Where the token appears outside a secret: resource inputs and non-secret outputs."""
    leaks = [
        f"{r.typ}::{r.name}" for r in mocks.resources if any(token in s for s in plain_strings(r.inputs))
    ]
    leaks += [
        f"output {k}"
        for k, v in outputs.items()
        if not secret[k] and any(token in s for s in plain_strings(v))
    ]
    return leaks
