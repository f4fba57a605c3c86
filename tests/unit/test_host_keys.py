"""AWS host keys from the console: real keys (ssh-keygen), the console text as cloud-init prints
it, EC2's GetConsoleOutput through botocore's Stubber; the pinned known_hosts is then checked by
ssh-keygen itself."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from flashfleet.components.host_keys import (
    BEGIN,
    END,
    HostKeysUnavailable,
    fetch_host_keys,
    known_hosts,
    known_hosts_lines,
    parse_console,
)


@pytest.fixture(scope="module")
def host_keys(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("keys")
    out = []
    for kind in ("ed25519", "ecdsa"):
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(d / kind)], check=True)
        out.append((d / f"{kind}.pub").read_text().strip())
    return out  # "type base64 comment"


def console(keys: list[str], prefix: str = "") -> str:
    boot = (
        "[    0.000000] Linux version 6.8.0-1015-aws\n[   12.1] cloud-init[812]: Cloud-init v. 24.1 running\n"
    )
    block = "\n".join([prefix + BEGIN, *(prefix + k for k in keys), prefix + END])
    return boot + block + "\n[   30.2] cloud-init[900]: finished\n"


def test_parses_the_first_block(host_keys: list[str]) -> None:
    text = console(host_keys)
    # a later block (a reboot, or anything a process wrote to the console) does not count
    text += console([host_keys[0]])
    keys = parse_console(text)
    assert [f"{t} {b}" for t, b in keys] == [" ".join(k.split()[:2]) for k in host_keys]


def test_prefixed_console_lines(host_keys: list[str]) -> None:
    assert len(parse_console(console(host_keys, prefix="ec2: "))) == 2


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("booting...\n", "no host-key block"),
        (f"{BEGIN}\nssh-ed25519 AAAA\n", "not complete"),
        (f"{BEGIN}\n{END}\n", "holds no key"),
        # a blob that does not decode to its own type is refused, not skipped
        (f"{BEGIN}\nssh-ed25519 {base64.b64encode(b'garbage').decode()} x\n{END}\n", "does not decode"),
    ],
)
def test_incomplete_or_bad_blocks_are_refused(text: str, why: str) -> None:
    with pytest.raises(HostKeysUnavailable, match=why):
        parse_console(text)


def test_known_hosts_pins_the_node(host_keys: list[str], tmp_path: Path) -> None:
    keys = parse_console(console(host_keys))
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(known_hosts_lines("203.0.113.10", keys)) + "\n")
    found = subprocess.run(
        ["ssh-keygen", "-F", "203.0.113.10", "-f", str(known)], capture_output=True, text=True, check=False
    )
    assert found.returncode == 0
    assert host_keys[0].split()[1] in found.stdout
    other = subprocess.run(
        ["ssh-keygen", "-F", "203.0.113.11", "-f", str(known)], capture_output=True, check=False
    )
    assert other.returncode != 0
    with pytest.raises(ValueError, match="not a host address"):
        known_hosts_lines("-oProxyCommand=x 1.2.3.4", keys)


def test_fetch_waits_for_the_block(host_keys: list[str]) -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    asked = {"InstanceId": "i-0123456789abcdef0", "Latest": False}
    for text in ("[    0.0] booting\n", console(host_keys)):
        stub.add_response(
            "get_console_output",
            {"InstanceId": asked["InstanceId"], "Output": base64.b64encode(text.encode()).decode()},
            asked,
        )
    slept: list[float] = []
    with stub:
        keys = fetch_host_keys(ec2, "i-0123456789abcdef0", delay_s=7, sleep=slept.append)
    stub.assert_no_pending_responses()
    assert len(keys) == 2
    assert slept == [7]


def test_fetch_gives_up(host_keys: list[str]) -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    for _ in range(3):
        stub.add_response("get_console_output", {"InstanceId": "i-1", "Output": ""})
    with (
        stub,
        pytest.raises(HostKeysUnavailable, match="i-1: no host-key block on the console yet after 3 tries"),
    ):
        fetch_host_keys(ec2, "i-1", attempts=3, sleep=lambda _: None)


def test_known_hosts_for_the_stack_pins_each_address_to_its_own_instance(
    host_keys: list[str], tmp_path: Path
) -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    for iid, key in (("i-a", host_keys[0]), ("i-b", host_keys[1])):
        text = base64.b64encode(console([key]).encode()).decode()
        stub.add_response(
            "get_console_output", {"InstanceId": iid, "Output": text}, {"InstanceId": iid, "Latest": False}
        )
    with stub:
        text = known_hosts(ec2, ["198.51.100.1", "198.51.100.2"], ["i-a", "i-b"])
    (tmp_path / "kh").write_text(text)
    assert text.splitlines() == [
        "198.51.100.1 " + " ".join(host_keys[0].split()[:2]),
        "198.51.100.2 " + " ".join(host_keys[1].split()[:2]),
    ]
    with pytest.raises(ValueError, match="2 addresses for 1 instances"):
        known_hosts(ec2, ["198.51.100.1", "198.51.100.2"], ["i-a"])
