"""Weights fetched once per stack: whether a stack fans out, and which node is its seed.

Every GPU node of a multi-node stack used to download the whole checkpoint from the Hub, and the
Hub limits requests per egress address (a stack behind one NAT address asks it N times). Here one
node, the seed (the stack's first GPU node), downloads; the stack's other GPU nodes fetch each
file from the seed over the cluster network (the seed serves its cache over HTTP on its private
address while the fan-out runs) and check it against the lock on arrival. Without a lock there is
nothing to check a peer's bytes against: every node then downloads from the Hub, as before.
flashfleet.inventory hands each node its part (HostVars.flashfleet_weights_fanout).
"""

from __future__ import annotations

from flashfleet.planning.resolve import NodePlan, StackPlan

# The seed's fan-out port on its private address: outside SGLang's, the router's and Mooncake's
# ports of the catalog (flashfleet.launch), open only while the fan-out runs.
FANOUT_PORT = 18470
# How long a peer keeps trying to reach the seed's server before it downloads from the Hub (the
# seed's job starts in the same play: seconds apart).
PEER_WAIT_S = 300


def fanout_seed(plan: StackPlan) -> NodePlan | None:
    """The node that asks the Hub for the stack, or None: each node asks on its own (one GPU node,
    no lock, or prestaged weights)."""
    gpu = plan.gpu_nodes
    if len(gpu) < 2 or plan.lock is None or plan.spec.weights.prestaged:
        return None
    return gpu[0]
