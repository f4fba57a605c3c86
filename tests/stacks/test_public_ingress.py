"""The public-ingress guard judges the union of allowedCidrs, not each prefix (issue 14: two /1s
opened ports 22 and 30000 to all of IPv4). Refused with exit 2 and the YAML path, before anything."""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.stack.ingress import public_addresses, too_public

PATH = "flashfleet:stack.nodes.source.allowedCidrs"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]


def cidrs(*values: str) -> Callable[[Doc], None]:
    def change(d: Doc) -> None:
        d["config"]["flashfleet:stack"]["nodes"]["source"]["allowedCidrs"] = list(values)

    return change


REFUSED = [
    ["0.0.0.0/1", "128.0.0.0/1"],  # the case that found it
    ["0.0.0.0/0"],
    ["::/0"],
    ["2000::/3"],  # all of the global IPv6 unicast space
    ["203.0.113.0/24", "::/1"],  # a harmless IPv4 list does not excuse an IPv6 hole
    [f"{n}.0.0.0/8" for n in (11, 12)],  # two public /8s
    ["2.0.0.0/7"],
    ["8.0.0.0/7", "8.0.0.0/8"],  # overlaps are counted once, still two /8s
]
ACCEPTED = [
    ["203.0.113.0/24"],
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"],  # private: not the internet
    ["11.0.0.0/8"],  # exactly the limit
    ["11.0.0.0/8", "10.0.0.0/8"],
    ["2001:db8::/32"],
    ["2001:db8:1::/48", "fc00::/7", "198.51.100.7/32"],
]


@pytest.mark.parametrize("values", REFUSED, ids=[",".join(v) for v in REFUSED])
def test_cidrs_covering_the_internet_are_refused_with_exit_2(
    write_stack: WriteStack, values: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    stacks_dir = write_stack("h200-lowlat", cidrs(*values))
    assert main(["validate", "broken", "--stacks-dir", str(stacks_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{PATH}: " in err
    assert "allowPublicIngress: true" in err
    assert "Traceback" not in err


def test_two_halves_name_the_share_they_open(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks_dir = write_stack("h200-lowlat", cidrs("0.0.0.0/1", "128.0.0.0/1"))
    assert main(["validate", "broken", "--stacks-dir", str(stacks_dir)]) == 2
    assert f"{PATH}: together these admit 86.2% of all IPv4 addresses" in capsys.readouterr().err


@pytest.mark.parametrize("values", ACCEPTED, ids=[",".join(v) for v in ACCEPTED])
def test_narrow_or_private_cidrs_pass(write_stack: WriteStack, values: list[str]) -> None:
    b = load_stack("broken", write_stack("h200-lowlat", cidrs(*values)))
    assert [str(c) for c in b.spec.nodes.source.allowed_cidrs] == values  # type: ignore[union-attr]


def test_the_explicit_flag_admits_the_halves(write_stack: WriteStack) -> None:
    def change(d: Doc) -> None:
        cidrs("0.0.0.0/1", "128.0.0.0/1", "::/0")(d)
        d["config"]["flashfleet:stack"]["nodes"]["source"]["allowPublicIngress"] = True

    b = load_stack("broken", write_stack("h200-lowlat", change))
    assert len(b.spec.nodes.source.allowed_cidrs) == 3  # type: ignore[union-attr]


def test_public_address_count() -> None:
    nets = [ip_network(n) for n in ("0.0.0.0/1", "128.0.0.0/1")]
    # 0/8, 10/8, 127/8; 100.64/10; 169.254/16, 192.168/16; 172.16/12; 224/4, 240/4
    private = 3 * 2**24 + 2**22 + 2 * 2**16 + 2**20 + 2 * 2**28
    assert public_addresses(nets, 4) == 2**32 - private
    assert public_addresses([ip_network("10.1.0.0/16")], 4) == 0
    assert public_addresses([ip_network("2001:db8::/32")], 6) == 2**96
    assert too_public([ip_network("2001:db8::/31")]) is not None
