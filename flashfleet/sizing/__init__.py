"""Sizing the two memory pools of GLM-5.3-Flash (paged KV and KDA state) and the HiCache host tier.

Pure and light: no pulumi, boto3 or ansible imports. The stack spec calls
``check_host_tier_fits``; ``flashfleet size`` uses the rest.
"""

from flashfleet.sizing.bootlog import (
    BootLog,
    KvPool,
    MambaCap,
    MambaPool,
    SchedulerLimits,
    parse_boot_log,
    read_boot_log,
)
from flashfleet.sizing.errors import SizingError
from flashfleet.sizing.host_tier import (
    HOST_TIER_FACTOR,
    HostTierError,
    check_host_tier_fits,
    host_tier_need_gb,
    host_tier_per_rank_gb,
    max_hicache_size_gb,
)
from flashfleet.sizing.ratio import (
    DEFAULT_RADIX_MODE,
    PIN_BELOW,
    RADIX_MODES,
    Plan,
    Prediction,
    Workload,
    draft_tokens_for,
    size_pools,
    state_slots,
    target_ratio,
)

__all__ = [
    "DEFAULT_RADIX_MODE",
    "HOST_TIER_FACTOR",
    "PIN_BELOW",
    "RADIX_MODES",
    "BootLog",
    "HostTierError",
    "KvPool",
    "MambaCap",
    "MambaPool",
    "Plan",
    "Prediction",
    "SchedulerLimits",
    "SizingError",
    "Workload",
    "check_host_tier_fits",
    "draft_tokens_for",
    "host_tier_need_gb",
    "host_tier_per_rank_gb",
    "max_hicache_size_gb",
    "parse_boot_log",
    "read_boot_log",
    "size_pools",
    "state_slots",
    "target_ratio",
]
