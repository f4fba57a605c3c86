"""AWS host keys from the console: real keys (ssh-keygen), the console text as cloud-init prints
it, EC2's GetConsoleOutput through botocore's Stubber (moto answers a fixed console without the
block: tests/bringup/test_host_keys_provider.py uses it for that case)."""

from __future__ import annotations

import base64
import subprocess
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from flashfleet.components.host_keys import (
    BEGIN,
    END,
    HostKeysUnavailable,
    parse_console,
    read_host_keys,
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


def test_other_output_inside_the_block_is_skipped(host_keys: list[str]) -> None:
    keys = [host_keys[0], "[   31.2] random: crng init done", host_keys[1]]
    assert len(parse_console(console(keys, prefix="ec2: "))) == 2


def test_a_key_that_names_another_type_is_refused(host_keys: list[str]) -> None:
    _, blob, _ = host_keys[0].split()  # an ed25519 key called RSA
    with pytest.raises(HostKeysUnavailable, match="a ssh-rsa key on the console does not decode"):
        parse_console(console([f"ssh-rsa {blob}"]))


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


def _ec2() -> Any:
    return boto3.client("ec2", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def _answer(stub: Stubber, instance_id: str, text: str) -> None:
    stub.add_response(
        "get_console_output",
        {"InstanceId": instance_id, "Output": base64.b64encode(text.encode()).decode()},
        {"InstanceId": instance_id, "Latest": True},
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_read_waits_for_every_node(host_keys: list[str]) -> None:
    ec2, clock = _ec2(), Clock()
    stub = Stubber(ec2)
    _answer(stub, "i-a", "[    0.0] booting\n")
    _answer(stub, "i-b", console([host_keys[1]]))
    _answer(stub, "i-a", console([host_keys[0]]))  # only i-a is asked again
    with stub:
        keys, why = read_host_keys(
            ec2,
            [("n0", "i-a"), ("n1", "i-b")],
            timeout_s=60,
            delay_s=7,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    stub.assert_no_pending_responses()
    assert keys == {"n0": [" ".join(host_keys[0].split()[:2])], "n1": [" ".join(host_keys[1].split()[:2])]}
    assert why == {}
    assert clock.slept == [7]


def test_read_gives_up_at_the_bound_and_names_the_node(host_keys: list[str]) -> None:
    ec2, clock = _ec2(), Clock()
    stub = Stubber(ec2)
    _answer(stub, "i-a", console([host_keys[0]]))
    for _ in range(3):  # at 0, 10 and 20 s; 30 s would pass the 25 s bound
        _answer(stub, "i-b", "[    0.0] booting\n")
    with stub:
        keys, why = read_host_keys(
            ec2,
            [("n0", "i-a"), ("n1", "i-b")],
            timeout_s=25,
            delay_s=10,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    stub.assert_no_pending_responses()
    assert list(keys) == ["n0"]
    assert why == {"n1": "i-b: no host-key block on the console yet after 25 s"}


def test_a_refused_permission_is_not_asked_again() -> None:
    ec2, clock = _ec2(), Clock()
    stub = Stubber(ec2)
    stub.add_client_error("get_console_output", "UnauthorizedOperation", "You are not authorized")
    with stub:
        keys, why = read_host_keys(
            ec2, [("n0", "i-a")], timeout_s=600, sleep=clock.sleep, clock=lambda: clock.now
        )
    assert keys == {}
    assert why == {
        "n0": "i-a: EC2 refused GetConsoleOutput (UnauthorizedOperation): allow ec2:GetConsoleOutput"
    }
    assert clock.slept == []


def test_a_transient_error_is_asked_again(host_keys: list[str]) -> None:
    ec2, clock = _ec2(), Clock()
    stub = Stubber(ec2)
    stub.add_client_error(
        "get_console_output", "InvalidInstanceID.NotFound", "not yet"
    )  # eventual consistency
    _answer(stub, "i-a", console(host_keys))
    with stub:
        keys, _ = read_host_keys(
            ec2, [("n0", "i-a")], timeout_s=600, sleep=clock.sleep, clock=lambda: clock.now
        )
    assert len(keys["n0"]) == 2
