"""A PD decode restarted once after a prefill it takes KV from restarted (an unplanned restart).

SGLang 0.5.23's decode keeps, per prefill bootstrap address, that prefill's rank info and its
transfer connections from the first room it bootstrapped there. A prefill that crashes and comes
back behind the same address (systemd starts its unit again) is a new process the decode never
re-bootstraps with: the decode's rooms from it fail on their waiting timeout until the decode
itself restarts, and 0.5.23 offers no lighter way (no endpoint re-bootstraps a peer). So each
decode node runs a small watcher (sglang_serve's pd-heal unit) that polls its prefills' /health
and, once one answers again after an outage, restarts each decode unit of the node that has run
since before that outage, once: a decode started during the outage (a planned update's cut
restarts the whole group) never met the old prefill and is left alone.

flashfleet.inventory hands each decode node its part (HostVars.flashfleet_pd_heal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flashfleet.launch import ContainerLaunch
from flashfleet.recipes import Recipe

# A prefill's unit starts it again RestartSec=10 s after it died (sglang_serve's unit template),
# and SGLang answers /health only once loaded: an unplanned restart is down for 10 s at least.
# Polled every 2 s and counted down after 3 failed polls in a row (about 4 s for a dead process,
# which refuses at once), no restart is missed, while one slow answer under load is no outage.
POLL_S = 2.0
DOWN_POLLS = 3
PROBE_TIMEOUT_S = 5.0


def pd_heal(recipe: Recipe, node_launches: Sequence[ContainerLaunch]) -> dict[str, Any] | None:
    """What this node's watcher needs (HostVars.flashfleet_pd_heal's fields): every prefill's
    /health and this node's decode units; None where the node runs no PD decode (no watcher)."""
    decodes = [f"{launch.container_name}.service" for launch in node_launches if launch.role == "decode"]
    prefills = [f"{p.url}/health" for p in recipe.processes if p.role == "prefill" and p.rank == 0 and p.url]
    if not decodes or not prefills:
        return None
    return {
        "prefills": prefills,
        "units": decodes,
        "poll_s": POLL_S,
        "down_polls": DOWN_POLLS,
        "probe_timeout_s": PROBE_TIMEOUT_S,
    }
