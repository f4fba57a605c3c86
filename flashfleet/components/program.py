"""The Pulumi program behind ``__main__.py``: validated bring-up in, stack outputs out.

Kept apart from ``__main__.py`` so tests run it under mocks with any stack, clock and token.
Dispatch is by ``nodes.source.kind``: host sources (``aws``, ``existing``) expose addresses and
hand an inventory to Ansible; ``kubernetes`` serves on the cluster itself (no hosts, no Ansible).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import pulumi

from flashfleet import outputs
from flashfleet.bringup.provider import attach
from flashfleet.components.aws import AwsNodes, AwsNodesArgs
from flashfleet.components.existing import ExistingHosts, ExistingHostsArgs
from flashfleet.components.kubernetes import KubernetesCluster, KubernetesClusterArgs, kubernetes_provider
from flashfleet.components.tags import iso_utc
from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan
from flashfleet.recipes.layouts import api_base
from flashfleet.stack import KubernetesSource
from flashfleet.stack.capacity_block import node_deadline


class NodeSource(Protocol):
    ssh_addresses: pulumi.Output[list[str]]
    private_addresses: pulumi.Output[list[str]]


def _aws(plan: StackPlan, expires_at: str) -> NodeSource:
    return AwsNodes(plan.stack, AwsNodesArgs(plan=plan, expires_at=expires_at))


def _existing(plan: StackPlan, expires_at: str) -> NodeSource:
    return ExistingHosts(plan.stack, ExistingHostsArgs(plan=plan))


NODE_SOURCES: dict[str, Callable[[StackPlan, str], NodeSource]] = {
    "aws": _aws,
    "existing": _existing,
}


def build_nodes(plan: StackPlan, expires_at: str) -> NodeSource:
    return NODE_SOURCES[plan.spec.nodes.source.kind](plan, expires_at)


def build_kubernetes(plan: StackPlan, hf_token: pulumi.Output[str] | None) -> KubernetesCluster:
    src = plan.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    args = KubernetesClusterArgs(
        source=src,
        hardware=plan.spec.hardware,
        nodes=plan.spec.nodes.count,
        recipe_for=plan.recipe_for,
        launch_settings=plan.launch_settings(),
        mooncake=plan.spec.mooncake,
        hf_token=hf_token,
        keep_cache=plan.spec.keeps_caches,
    )
    provider = kubernetes_provider(plan.stack, src)
    return KubernetesCluster(plan.stack, args, opts=pulumi.ResourceOptions(provider=provider))


def deploy(
    plan: StackPlan,
    hf_token: pulumi.Output[str] | None,
    now: datetime,
    block_end: datetime | None = None,
    site_args: dict[str, Any] | None = None,
    *,
    api_key: pulumi.Output[str] | None = None,
) -> dict[str, Any]:
    """Register the stack's resources; return its outputs by key (``flashfleet.outputs``).

    ``block_end``: the end of the stack's Capacity Block, which the nodes' deadline never passes.
    ``site_args``: role arguments for every bring-up run (site mirrors, say), checked against
    the roles' argument specs like `flashfleet configure -e`.
    ``api_key``: the serving API key (``flashfleet:apiKey``), a secret like the HF token: in the
    state and outputs only encrypted, and to the nodes only through the bring-up's environment.
    """
    expires_at = iso_utc(node_deadline(plan.spec, now, block_end))
    if isinstance(plan.spec.nodes.source, KubernetesSource):
        # The token reaches the cluster as a Secret only; with no Ansible hand-off it is no output.
        cluster = build_kubernetes(plan, hf_token)
        return {
            outputs.ENDPOINT: cluster.endpoint,
            outputs.NAMESPACE: cluster.namespace,
            outputs.WORKLOADS: cluster.workloads,
            outputs.EXPIRES_AT: expires_at,  # recorded for sweeping; nothing enforces it on a cluster
        }
    nodes = build_nodes(plan, expires_at)
    # SSH host keys: AWS nodes' from their consoles; existing hosts list theirs in the stack.
    keys = nodes.host_keys if isinstance(nodes, AwsNodes) else pulumi.Output.from_input(None)
    inventory = pulumi.Output.all(nodes.ssh_addresses, nodes.private_addresses, keys).apply(
        lambda a: build_inventory(plan, a[0], a[1], host_keys=a[2])
    )
    exports: dict[str, Any] = {
        outputs.INVENTORY: inventory,
        outputs.INVENTORY_JSON: pulumi.Output.json_dumps(inventory),
        outputs.ADDRESSES: nodes.ssh_addresses,
        outputs.PRIVATE_ADDRESSES: nodes.private_addresses,
        outputs.ENDPOINT: nodes.ssh_addresses.apply(
            lambda a: api_base(a[plan.endpoint_node], plan.serving_port)
        ),
        outputs.NODE_NAMES: [n.name for n in plan.nodes],
        outputs.EXPIRES_AT: expires_at,
    }
    if isinstance(nodes, AwsNodes):
        exports[outputs.INSTANCE_IDS] = nodes.instance_ids
    if hf_token is not None:
        # Only for the ansible-runner hand-off; it stays a secret in the state and outputs.
        exports[outputs.HF_TOKEN] = pulumi.Output.secret(hf_token)
    # Prepare, configure Mooncake, serve and verify once the nodes exist; teardown on destroy.
    if api_key is not None:
        # For `flashfleet configure` and `bench` (the Authorization header); secret like the token.
        exports[outputs.API_KEY] = pulumi.Output.secret(api_key)
    bringup = attach(
        "bringup", inventory, hf_token, playbook="site.yml", extravars=site_args, api_key=api_key
    )
    exports[outputs.BRINGUP_RUN_DIR] = bringup.runDir
    if isinstance(nodes, AwsNodes) and plan.weights_snapshot is not None:
        # once the bring-up has served: the weights it downloaded outlive the stack
        kept = nodes.keep_weights(bringup.runDir)
        exports[outputs.WEIGHTS_SNAPSHOT] = pulumi.Output.all(
            kept.snapshot_id, kept.made, kept.expires_at
        ).apply(lambda a: {"snapshotId": a[0], "made": a[1], "expiresAt": a[2]})
    return exports
