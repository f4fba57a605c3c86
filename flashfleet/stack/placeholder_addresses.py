"""Documentation addresses (RFC 5737: TEST-NET-1, -2 and -3): the catalog's and the README's
example hosts. Never routed, so a connection to one can only time out: commands that would reach
a host say it is a placeholder instead of trying."""

from __future__ import annotations

import ipaddress

NETWORKS = tuple(ipaddress.ip_network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def placeholder_network(address: str) -> str | None:
    """The documentation network `address` is in, or None (a name or any other address)."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return None
    return next((str(net) for net in NETWORKS if ip in net), None)


def placeholder_text(address: str, net: str) -> str:
    return f"{address} is a documentation placeholder ({net}, RFC 5737), not a host: nothing was tried"
