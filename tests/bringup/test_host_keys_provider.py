"""The AWS host-key reader (components.aws_host_keys) as the engine runs it: dill-pickled and
served by `python -m pulumi.dynamic` in another process, against moto on loopback (whose
console is a fixed text with no host-key block), and after an in-process dill round trip
against botocore's Stubber (the console as cloud-init prints it)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import dill
import pulumi
import pytest
from botocore.stub import Stubber
from pulumi.output import Unknown

from flashfleet.components import aws_host_keys
from flashfleet.components.aws_host_keys import HostKeysProvider, pinned_keys
from flashfleet.components.host_keys import BEGIN, END
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack

from .engine import ProviderHost, serialized_provider

URN = "urn:pulumi:test::flashfleet::pulumi-python:dynamic/flashfleet:HostKeys::h200-lowlat-host-keys"
REGION = "eu-west-1"


@pytest.fixture
def moto_instance(moto_env: str) -> str:
    # the provider process inherits moto_env's settings, as it inherits the caller's under pulumi up
    ec2 = boto3.client("ec2", region_name=REGION)
    run = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t3.micro")
    return str(run["Instances"][0]["InstanceId"])


def props(ids: list[str], nodes: list[str], timeout_s: float = 0) -> dict[str, Any]:
    return {"instanceIds": ids, "nodes": nodes, "region": REGION, "timeoutS": timeout_s}


@pytest.fixture(scope="module")
def node_key(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "k")], check=True)
    return " ".join((d / "k.pub").read_text().split()[:2])


def test_the_provider_unpickles_with_no_captured_state() -> None:
    code = (
        "import base64,dill,sys; p=dill.loads(base64.b64decode(sys.stdin.read()));"
        "print(type(p).__module__, type(p).__name__, sorted(vars(p)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=serialized_provider(HostKeysProvider()),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["flashfleet.components.aws_host_keys", "HostKeysProvider", "[]"]


def test_a_console_without_the_block_is_recorded_and_stops_the_bringup(
    moto_instance: str, tmp_path: Path
) -> None:
    """moto's console is a fixed boot log with no host-key block: within the bound (0 s: one
    ask) the node is recorded as missing, and pinned_keys makes it one line naming the node."""
    host = ProviderHost(tmp_path, HostKeysProvider(), URN)
    try:
        _id, out = host.create(props([moto_instance], ["h200-lowlat-node-0"]))
    finally:
        host.close()
    assert out["keys"] == [[]]
    assert out["missing"] == [
        f"h200-lowlat-node-0 ({moto_instance}: no host-key block on the console yet after 0 s)"
    ]
    assert "Traceback" not in host.stderr_path.read_text(errors="replace")
    with pytest.raises(pulumi.RunError) as err:
        pinned_keys(out["keys"], out["missing"])
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"no SSH host keys for h200-lowlat-node-0 ({moto_instance}: no host-key block")
    assert "ec2:GetConsoleOutput" in line


def _stubbed(monkeypatch: pytest.MonkeyPatch, answers: dict[str, str]) -> Stubber:
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    for iid, text in answers.items():
        stub.add_response(
            "get_console_output",
            {"InstanceId": iid, "Output": base64.b64encode(text.encode()).decode()},
            {"InstanceId": iid, "Latest": True},
        )
    stub.activate()
    monkeypatch.setattr(aws_host_keys, "_ec2", lambda region: ec2)
    return stub


def test_read_once_kept_and_read_again_only_for_new_instances(
    monkeypatch: pytest.MonkeyPatch, node_key: str, tmp_path: Path
) -> None:
    provider = dill.loads(base64.b64decode(serialized_provider(HostKeysProvider())))
    console = f"[   12.1] cloud-init[812]: running\n{BEGIN}\n{node_key} root@ip-10-0-0-1\n{END}\n"
    stub = _stubbed(monkeypatch, {"i-0a": console})
    news = props(["i-0a"], ["h200-lowlat-node-0"], timeout_s=60)
    created = provider.create(news)
    stub.assert_no_pending_responses()
    olds = created.outs
    assert olds["keys"] == [[node_key]]
    assert olds["missing"] == []

    # a second `up` with the same instances: no change, EC2 not asked (no answer is stubbed)
    assert provider.diff(created.id, olds, dict(news)).changes is False
    # a replaced instance, a node not read last time, or ids not known yet (preview): read again
    assert provider.diff(created.id, olds, props(["i-0b"], ["h200-lowlat-node-0"])).changes is True
    assert provider.diff(created.id, {**olds, "missing": ["h200-lowlat-node-0 (...)"]}, news).changes is True
    assert provider.diff(created.id, olds, {**news, "instanceIds": Unknown()}).changes is True

    # the keys reach the host as the fact existing hosts' hostKeys become
    plan = load_stack("h200-lowlat")
    inv = build_inventory(
        plan, ["203.0.113.7"], ["10.0.0.7"], host_keys=pinned_keys(olds["keys"], olds["missing"])
    )
    assert inv["all"]["hosts"]["h200-lowlat-node-0"]["flashfleet_host_keys"] == [node_key]
