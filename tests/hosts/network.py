"""The private bridge the test hosts live on: a free /24, torn down with the pool.

Only addresses on this bridge (namespaces the tests create) are ever targeted. No forwarding or
NAT is set up: the hosts reach nothing but the controller's address on the bridge.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def _name_taken(name: str) -> bool:
    """Any link or namespace of that name or derived from it (another suite's pool)."""
    links = sh("ip", "-o", "link", "show").stdout
    namespaces = sh("ip", "netns", "list").stdout
    return f" {name}:" in links or f" {name}h" in links or f"{name}-" in namespaces


def _subnet_in_use(prefix: str) -> bool:
    out = sh("ip", "-o", "-4", "addr", "show").stdout
    return f" {prefix}." in out


@dataclass
class Bridge:
    name: str
    prefix: str  # first three octets, e.g. "10.213.7"

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    @classmethod
    def create(cls) -> Bridge:
        # Several suites may run on one machine: take the first free bridge/subnet pair.
        for n in range(1, 250):
            name, prefix = f"ffbr{n}", f"10.213.{n}"
            if _name_taken(name) or _subnet_in_use(prefix):
                continue
            if sh("ip", "link", "add", name, "type", "bridge", check=False).returncode != 0:
                continue  # taken meanwhile by a suite starting at the same time
            sh("ip", "addr", "add", f"{prefix}.1/24", "dev", name)
            sh("ip", "link", "set", name, "up")
            return cls(name, prefix)
        raise RuntimeError("no free bridge name/subnet for test hosts")

    def attach(self, netns: str, index: int) -> str:
        """Creates netns `netns` wired to the bridge; returns its address."""
        address = f"{self.prefix}.{10 + index}"
        outer = f"{self.name}h{index}"
        sh("ip", "netns", "add", netns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", f"{outer}p")
        sh("ip", "link", "set", f"{outer}p", "netns", netns)
        sh("ip", "link", "set", outer, "master", self.name, "up")
        ns = ("ip", "netns", "exec", netns)
        sh(*ns, "ip", "link", "set", f"{outer}p", "name", "eth0")
        sh(*ns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        sh(*ns, "ip", "link", "set", "eth0", "up")
        sh(*ns, "ip", "link", "set", "lo", "up")
        sh(*ns, "ip", "route", "add", "default", "via", self.gateway)
        return address

    def destroy(self) -> None:
        sh("ip", "link", "del", self.name, check=False)
