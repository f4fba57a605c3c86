"""Boot-log fixtures written to sglang 0.5.23's exact log format strings."""

from __future__ import annotations

from pathlib import Path

LOGS = Path(__file__).parent / "logs"

# The sglang compute-mamba-ratio skill's worked example (TP8, fp32 ssm + fp8 KV), as eight ranks.
WORKED_EXAMPLE = LOGS / "mla_fp8_tp8_worked_example.log"
# EAGLE 5/1/6 under DP attention: intermediate state, a draft KV pool, colours, ms timestamps.
SPECULATIVE = LOGS / "mla_bf16_speculative_dp4.log"
# An older build: MHA K/V sizes and no dtype.
MHA_NO_DTYPE = LOGS / "mha_no_dtype_single_rank.log"

MAMBA_LINE = (
    "Mamba Cache is allocated. max_mamba_cache_size: 257, conv_state size: 0.46GB, ssm_state size: 13.04GB "
)
KV_LINE = "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1167552, KV size: 15.03 GB"
