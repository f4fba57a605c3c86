"""What `pulumi preview` and `pulumi up` refuse before anything is created, run offline.

The bring-up resource's provider checks its inventory and role arguments with
`flashfleet.bringup.handoff.validate`; `flashfleet validate` calls the same function on the
inventory the program would build, so "ok" there means the engine's check passes too. Only what
needs a cloud call is left out, and `not_checked_offline` names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan
from flashfleet.stack import AwsSource, ExistingSource, KubernetesSource
from flashfleet.stack.capacity_block import reservation_id

# Where AWS nodes' addresses stand until EC2 assigns them: TEST-NET-1 (RFC 5737), never routed.
_PLACEHOLDER = "192.0.2."


def existing_addresses(src: ExistingSource) -> tuple[list[str], list[str]]:
    """(SSH addresses, private addresses) of listed hosts, in node order."""
    return [h.address for h in src.hosts], [h.private_address or h.address for h in src.hosts]


def offline_inventory(plan: StackPlan) -> dict[str, Any] | None:
    """The inventory the program hands the bring-up (AWS nodes at placeholder addresses, with no
    host keys yet); None for a Kubernetes stack, which has no Ansible hand-off."""
    src = plan.spec.nodes.source
    if isinstance(src, KubernetesSource):
        return None
    if isinstance(src, ExistingSource):
        return build_inventory(plan, *existing_addresses(src))
    placeholders = [f"{_PLACEHOLDER}{n.index + 1}" for n in plan.nodes]
    return build_inventory(plan, placeholders, placeholders)


def check_bringup(plan: StackPlan, role_vars: Mapping[str, Any]) -> None:
    """Raises BringupInputError (one line naming the host or role and the field) as the bring-up
    resource's check would: the inventory contract and the role arguments of site.yml."""
    from flashfleet.bringup import handoff
    from flashfleet.bringup.project import DEFAULT_PROJECT

    inventory = offline_inventory(plan)
    if inventory is not None:
        handoff.validate(DEFAULT_PROJECT, "site.yml", inventory, role_vars, stack=plan.stack)


def not_checked_offline(plan: StackPlan) -> list[str]:
    src = plan.spec.nodes.source
    if isinstance(src, AwsSource):
        # the pre-flight reads EC2 only for a reservation or block (flashfleet.capacity.preflight)
        reserved = ["the reservation or block is usable now (EC2)"] if reservation_id(plan.spec) else []
        return [*reserved, "the nodes' addresses and SSH host keys (EC2 assigns them at up)"]
    if isinstance(src, KubernetesSource):
        return ["the cluster itself (its API answers only at up)"]
    return []
