"""Pulumi components, one per node source, and the program that wires them to the outputs.

Dispatch is by ``nodes.source.kind`` through ``NODE_SOURCES``: a new source (Kubernetes) is one
more entry. Every component exposes ``ssh_addresses`` and ``private_addresses``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import pulumi

from flashfleet.components.aws import AwsNodes, AwsNodesArgs
from flashfleet.components.existing import ExistingHosts, ExistingHostsArgs
from flashfleet.stack import Bringup


class NodeSource(Protocol):
    ssh_addresses: pulumi.Output[list[str]]
    private_addresses: pulumi.Output[list[str]]


def _aws(b: Bringup, expires_at: str) -> NodeSource:
    return AwsNodes(b.stack, AwsNodesArgs(bringup=b, expires_at=expires_at))


def _existing(b: Bringup, expires_at: str) -> NodeSource:
    return ExistingHosts(b.stack, ExistingHostsArgs(bringup=b))


NODE_SOURCES: dict[str, Callable[[Bringup, str], NodeSource]] = {
    "aws": _aws,
    "existing": _existing,
}


def build_nodes(b: Bringup, expires_at: str) -> NodeSource:
    return NODE_SOURCES[b.spec.nodes.source.kind](b, expires_at)


__all__ = ["NODE_SOURCES", "AwsNodes", "AwsNodesArgs", "ExistingHosts", "ExistingHostsArgs", "build_nodes"]
