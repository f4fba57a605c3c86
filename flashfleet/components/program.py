"""The Pulumi program behind ``__main__.py``: validated bring-up in, stack outputs out.

Kept apart from ``__main__.py`` so tests run it under mocks with any stack, clock and token.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pulumi

from flashfleet import outputs
from flashfleet.components import build_nodes
from flashfleet.components.tags import iso_utc
from flashfleet.inventory import build_inventory
from flashfleet.stack import Bringup


def deploy(b: Bringup, hf_token: pulumi.Output[str] | None, now: datetime) -> dict[str, Any]:
    """Register the stack's resources; return its outputs by key (``flashfleet.outputs``)."""
    expires_at = iso_utc(now + b.spec.ttl)
    nodes = build_nodes(b, expires_at)
    inventory = pulumi.Output.all(nodes.ssh_addresses, nodes.private_addresses).apply(
        lambda a: build_inventory(b, a[0], a[1])
    )
    exports: dict[str, Any] = {
        outputs.INVENTORY: inventory,
        outputs.ADDRESSES: nodes.ssh_addresses,
        outputs.PRIVATE_ADDRESSES: nodes.private_addresses,
        outputs.ENDPOINT: nodes.ssh_addresses.apply(lambda a: f"http://{a[0]}:{b.serving_port}/v1"),
        outputs.NODE_NAMES: [n.name for n in b.nodes],
        outputs.EXPIRES_AT: expires_at,
    }
    if hf_token is not None:
        # Only for the ansible-runner hand-off; it stays a secret in the state and outputs.
        exports[outputs.HF_TOKEN] = pulumi.Output.secret(hf_token)
    return exports
