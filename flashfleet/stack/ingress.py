"""How much of the internet a list of CIDRs opens SSH and the serving port to.

A prefix check alone is bypassed: ``[0.0.0.0/1, 128.0.0.0/1]`` is all of IPv4.
This judges the union of the CIDRs, per address family, by the share of the family's address
space it covers, not counting private and other non-routable blocks (an office VPN's
``10.0.0.0/8`` opens nothing to the internet).

Threshold: more than a /8's worth of public IPv4 (2**24 addresses, 1/256 of the space), or more
than a /32's worth of IPv6 (an ISP-sized allocation), is "the internet" and needs
``allowPublicIngress: true``. The largest single organisations have /8s; an office, a VPN or a
cloud region's NAT range is far below either line.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network, IPv6Network, collapse_addresses, ip_network

Network = IPv4Network | IPv6Network

MAX_PUBLIC = {4: 2**24, 6: 2**96}
LIMIT_TEXT = {4: "a /8", 6: "a /32"}

# Blocks no internet client comes from (RFC 6890 and friends); disjoint per family.
NOT_PUBLIC = {
    4: [
        ip_network(n)
        for n in (
            "0.0.0.0/8",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "224.0.0.0/4",
            "240.0.0.0/4",
        )
    ],
    6: [ip_network(n) for n in ("::/8", "fc00::/7", "fe80::/10", "ff00::/8")],
}


CIDR_RULE = (
    "must be an IPv4 or IPv6 network in CIDR notation such as 203.0.113.0/24 "
    "(a string with its /prefix, no host bits set, no %zone)"
)


def parse_cidr(raw: object) -> object:
    """A CIDR string to a network (pydantic BeforeValidator); one clear message for the rest.

    Only a string with an explicit prefix: `ip_network` would read the number 0 as 0.0.0.0/32
    and a bare address as a /32, and keep an IPv6 zone (`%eth0`) that no security group takes.
    """
    if isinstance(raw, IPv4Network | IPv6Network):  # built in Python, already a network
        return raw
    if not isinstance(raw, str) or "/" not in raw or "%" in raw:
        raise ValueError(f"{raw!r} {CIDR_RULE}")
    try:
        return ip_network(raw.strip(), strict=True)
    except ValueError:
        raise ValueError(f"{raw!r} {CIDR_RULE}") from None


def public_addresses(cidrs: Iterable[Network], version: int) -> int:
    """Addresses in the union of ``cidrs`` of one family, private blocks not counted."""
    union = list(collapse_addresses(c for c in cidrs if c.version == version))  # type: ignore[type-var]  # one family at a time
    total = sum(n.num_addresses for n in union)
    # union and NOT_PUBLIC are each disjoint; two CIDRs overlap only when one holds the other
    for n in union:
        for private in NOT_PUBLIC[version]:
            if n.subnet_of(private):  # type: ignore[arg-type]
                total -= n.num_addresses
            elif private.subnet_of(n):  # type: ignore[arg-type]
                total -= private.num_addresses
    return total


def too_public(cidrs: Iterable[Network]) -> str | None:
    """Why these CIDRs open the ports to the internet, or None."""
    cidrs = list(cidrs)
    for version in (4, 6):
        count = public_addresses(cidrs, version)
        if count > MAX_PUBLIC[version]:
            share = count / 2 ** (32 if version == 4 else 128)
            return (
                f"together these admit {share:.1%} of all IPv{version} addresses "
                f"(more than {LIMIT_TEXT[version]} of public addresses)"
            )
    return None


def require_public_opt_in(cidrs: Iterable[Network], opted_in: bool, opens: str) -> None:
    """Refuse CIDRs that admit the internet (`too_public`) unless allowPublicIngress says so;
    `opens` names what they would open, for the message."""
    why = too_public(cidrs)
    if why is not None and not opted_in:
        raise ValueError(
            f"{why}: that opens {opens} to the internet; set allowPublicIngress: true to mean it"
        )
