"""`check` and `bench` never dial a documentation address (RFC 5737), the catalog's and the
README's example hosts: they say the host is a placeholder, in one line. The finding: `check`
on the README's own stack tried SSH to 192.0.2.10 and waited out a 3 s timeout."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.cli.shared import stackops
from flashfleet.stack.placeholder_addresses import placeholder_network

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "stacks" / "Pulumi.h200-pair.yaml")


@pytest.fixture
def no_dialling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a connection was tried: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize(
    ("address", "net"),
    [
        ("192.0.2.10", "192.0.2.0/24"),
        ("198.51.100.255", "198.51.100.0/24"),
        ("203.0.113.1", "203.0.113.0/24"),
        ("192.0.3.1", None),
        ("10.0.0.1", None),
        ("node-0", None),
    ],
)
def test_the_three_documentation_networks_and_nothing_else(address: str, net: str | None) -> None:
    assert placeholder_network(address) == net


def test_check_says_a_placeholder_host_is_one_and_tries_nothing(
    no_dialling: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", EXAMPLE]) == 1
    out = capsys.readouterr().out
    ssh = [line for line in out.splitlines() if line.startswith("ssh ")]
    assert ssh == [
        f"ssh {a}               missing  {a} is a documentation placeholder (192.0.2.0/24, RFC 5737), "
        "not a host: nothing was tried"
        for a in ("192.0.2.10", "192.0.2.11")
    ]
    assert "put the host's own address in nodes.source.hosts[0].address" in out


def test_bench_refuses_an_endpoint_at_a_placeholder(
    no_dialling: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "h200-lowlat", "--endpoint", "http://203.0.113.5:30000", "--local"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        "flashfleet bench: --endpoint http://203.0.113.5:30000: 203.0.113.5 is a documentation placeholder "
        "(203.0.113.0/24, RFC 5737), not a host: nothing was tried"
    ]


def test_bench_refuses_a_stack_whose_recorded_hosts_are_placeholders(
    tmp_path: Path, no_dialling: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the README's host walkthrough, configured as written: the run recorded the example's addresses
    assert main(["inventory", EXAMPLE, "--format", "json"]) == 0
    run = tmp_path / "runs" / "h200-pair" / "20261207T000000-site"
    run.mkdir(parents=True)
    (run / "inventory.json").write_text(capsys.readouterr().out)
    monkeypatch.setenv("FLASHFLEET_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(stackops, "cli_available", lambda: False)
    assert main(["bench", EXAMPLE, "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(
        "flashfleet bench: stack h200-pair: host h200-pair-node-0: 192.0.2.10 is a documentation placeholder"
    )
