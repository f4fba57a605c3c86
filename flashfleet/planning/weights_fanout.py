"""Weights fetched once per stack: which node asks the Hub, and which fetch from it.

Every GPU node of a multi-node stack used to download the whole checkpoint from the Hub, and the
Hub limits requests per egress address (a stack behind one NAT address asks it N times). Here one
node, the seed (the stack's first GPU node), downloads; the stack's other GPU nodes fetch each
file from the seed over the cluster network (the seed serves its cache over HTTP on its private
address while the fan-out runs) and check it against the lock on arrival. Without a lock there is
nothing to check a peer's bytes against: every node then downloads from the Hub, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from flashfleet.bringup.host_vars import WeightsFanout
from flashfleet.planning.resolve import StackPlan

# The seed's fan-out port on its private address: outside SGLang's, the router's and Mooncake's
# ports of the catalog (flashfleet.launch), open only while the fan-out runs.
FANOUT_PORT = 18470
# How long a peer keeps trying to reach the seed's server before it downloads from the Hub (the
# seed's job starts in the same play: seconds apart).
PEER_WAIT_S = 300


def fanout_for(plan: StackPlan, index: int, private_addresses: Sequence[str]) -> WeightsFanout | None:
    """Node `index`'s part, or None: it downloads from the Hub on its own (a single-node stack, no
    lock, prestaged weights, a router's own host)."""
    gpu = plan.gpu_nodes
    if len(gpu) < 2 or plan.lock is None or plan.spec.weights.prestaged:
        return None
    node = plan.nodes[index]
    if not node.gpu_node:
        return None
    seed = gpu[0]
    common = {"seed": seed.name, "seed_address": private_addresses[seed.index], "port": FANOUT_PORT}
    if node.index == seed.index:
        return WeightsFanout(role="seed", peers=[n.name for n in gpu[1:]], wait_s=PEER_WAIT_S, **common)
    return WeightsFanout(role="peer", wait_s=PEER_WAIT_S, **common)
