"""Does the HiCache L1+L2 host tier fit in a node's memory?

`--hicache-size` (decimal GB, per rank) sizes only the host copy of the KV pool; the host also
keeps copies of the KDA state pool and the DSA indexer pool, which grow with it. The one measured
point: the MI355X AgentX recipe, `--hicache-size 180` on four ranks per node, needs 750 GB per
node, i.e. 187.5 GB per rank (quoted as "about 190"). We scale that measured overhead with the
tier: need per rank = hicache_size * 750 / (4 * 180), about 4.2 % over the flag's value.
A tier that does not fit is refused: sglang does not start when it cannot allocate it.
"""

from __future__ import annotations

import math

from flashfleet.sizing.errors import SizingError

MEASURED_HICACHE_SIZE_GB = 180
MEASURED_RANKS_PER_NODE = 4
MEASURED_NODE_NEED_GB = 750
HOST_TIER_FACTOR = MEASURED_NODE_NEED_GB / (MEASURED_RANKS_PER_NODE * MEASURED_HICACHE_SIZE_GB)


class HostTierError(SizingError):
    """The host tier needs more memory than the node has."""


def host_tier_per_rank_gb(hicache_size_gb: float) -> float:
    """Host memory one rank's tier needs, state and indexer copies included."""
    if not (math.isfinite(hicache_size_gb) and hicache_size_gb > 0):
        raise SizingError(f"hicache size must be a positive number of GB, not {hicache_size_gb!r}")
    return hicache_size_gb * HOST_TIER_FACTOR


def host_tier_need_gb(hicache_size_gb: float, ranks_per_node: int) -> float:
    """Host memory the tier needs on one node (every rank on it keeps its own tier)."""
    if ranks_per_node < 1:
        raise SizingError(f"ranks per node must be at least 1, not {ranks_per_node}")
    return host_tier_per_rank_gb(hicache_size_gb) * ranks_per_node


def check_host_tier_fits(
    hicache_size_gb: float, ranks_per_node: int, host_memory_gb: float, *, reserved_gb: float = 0.0
) -> float:
    """Return the node's need in GB, or raise HostTierError with the numbers when it does not fit.

    ``reserved_gb`` is memory the caller keeps for everything else on the node (OS, containers,
    weight loading); nothing is assumed by default.
    """
    if not (math.isfinite(host_memory_gb) and host_memory_gb > 0):
        raise SizingError(f"host memory must be a positive number of GB, not {host_memory_gb!r}")
    if reserved_gb < 0:
        raise SizingError(f"reserved host memory must be 0 or more GB, not {reserved_gb!r}")
    need = host_tier_need_gb(hicache_size_gb, ranks_per_node)
    usable = host_memory_gb - reserved_gb
    if need > usable:
        reserve = f" minus {reserved_gb:g} GB reserved" if reserved_gb else ""
        raise HostTierError(
            f"HiCache host tier does not fit: --hicache-size {hicache_size_gb:g} needs "
            f"{host_tier_per_rank_gb(hicache_size_gb):.1f} GB per rank x {ranks_per_node} ranks = "
            f"{need:.1f} GB, but the node has {host_memory_gb:g} GB{reserve}; the server would not "
            f"start (largest size that fits: {max_hicache_size_gb(usable, ranks_per_node)} GB)"
        )
    return need


def max_hicache_size_gb(host_memory_gb: float, ranks_per_node: int) -> int:
    """The largest whole --hicache-size whose tier fits in host_memory_gb."""
    if ranks_per_node < 1:
        raise SizingError(f"ranks per node must be at least 1, not {ranks_per_node}")
    return max(0, math.floor(host_memory_gb / (ranks_per_node * HOST_TIER_FACTOR) + 1e-9))
