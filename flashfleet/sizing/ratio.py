"""The balanced split between the KDA state pool and the KV pool, from one boot log.

Method (sglang's compute-mamba-ratio skill):
    r* = (S + D) * token_equiv * dcp / L,   token_equiv = state_bytes_per_slot / kv_bytes_per_token
S is the state slots one running request holds (radix-cache mode), D the speculative draft
tokens (each running request also keeps D intermediate states), L the average request length
(prompt + output). Below PIN_BELOW the ratio is too small to be stable, so the state pool is
pinned instead: --max-mamba-cache-size = concurrency * S.

Predictions mirror sglang 0.5.23's kv_cache_configurator: the memory both pools share ("rest")
is split r : 1; with speculative decoding the state budget is solved jointly for S main slots
and D intermediate states per request; the KV pool gets what the state pool leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, field_serializer

from flashfleet.sizing.bootlog import GIB, BootLog
from flashfleet.sizing.errors import SizingError

PIN_BELOW = 0.15
BALANCED_WITHIN = 0.10  # the pools count as balanced when their request caps differ by less

# radix-cache mode -> (S, S with SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1); mirrors
# kv_cache_configurator._calculate_mamba_ratio (base 3, plus the track buffer's ping-pong slots).
RADIX_MODES: dict[str, tuple[int, int]] = {
    "disabled": (1, 1),  # --disable-radix-cache
    "no_buffer": (3, 3),
    "extra_buffer": (5, 4),  # sglang's default, overlap scheduler on
    "extra_buffer_no_overlap": (4, 3),  # overlap off, or pp > 1
    "extra_buffer_lazy": (4, 3),
}
DEFAULT_RADIX_MODE = "extra_buffer"


def state_slots(radix_mode: str = DEFAULT_RADIX_MODE, *, skip_decode_lock: bool = False) -> int:
    if radix_mode not in RADIX_MODES:
        raise SizingError(f"unknown radix mode {radix_mode!r} (choose from: {', '.join(RADIX_MODES)})")
    plain, skipped = RADIX_MODES[radix_mode]
    return skipped if skip_decode_lock else plain


def draft_tokens_for(strategy: str) -> int:
    """Draft tokens a strategy renders with: the EAGLE shape when it speculates, else 0."""
    from flashfleet.recipes.layouts import MTP_5_1_6, STRATEGIES

    if strategy not in STRATEGIES:
        from flashfleet.suggest import did_you_mean

        hint = did_you_mean(strategy, STRATEGIES)
        raise SizingError(f"unknown strategy {strategy!r} (choose from: {', '.join(STRATEGIES)}){hint}")
    return 0 if STRATEGIES[strategy].get("speculative") == "off" else MTP_5_1_6.draft_tokens


def target_ratio(
    token_equiv: float, avg_request_len: float, slots: int, draft: int = 0, dcp: int = 1
) -> float:
    return (slots + draft) * token_equiv * dcp / avg_request_len


@dataclass(frozen=True)
class Workload:
    avg_request_len: float
    slots: int = RADIX_MODES[DEFAULT_RADIX_MODE][0]
    draft_tokens: int = 0
    dcp: int = 1
    concurrency: int | None = None

    def __post_init__(self) -> None:
        L = self.avg_request_len
        if not (isinstance(L, int | float) and math.isfinite(L) and L > 0):
            raise SizingError(f"average request length must be a positive number of tokens, not {L!r}")
        if self.slots < 1:
            raise SizingError(f"state slots per request must be at least 1, not {self.slots}")
        if self.draft_tokens < 0:
            raise SizingError(f"draft tokens must be 0 or more, not {self.draft_tokens}")
        if self.dcp < 1:
            raise SizingError(f"dcp size must be at least 1, not {self.dcp}")
        if self.concurrency is not None and self.concurrency < 1:
            raise SizingError(f"concurrency must be at least 1, not {self.concurrency}")


class Prediction(BaseModel):
    """What one split gives: state slots, KV tokens and the requests each pool admits."""

    model_config = ConfigDict(frozen=True)

    mamba_slots: int
    state_gib: float  # main slots plus intermediate speculative state
    kv_tokens: int
    kv_gib: float
    kda_request_cap: int  # sglang clamps max_running_requests to mamba_slots // S
    kv_request_cap: int  # requests of length L the KV pool holds at once
    max_running_requests: int  # sglang's value: the clamp, its generic default, tokens // 2
    limiting_pool: str  # kda-state | kv | balanced

    @field_serializer("state_gib", "kv_gib")
    def _gib(self, value: float) -> float:
        return round(value, 2)  # a report's precision; the figures stay exact


@dataclass(frozen=True)
class Plan:
    """The recommendation: exactly one of mamba_full_memory_ratio / max_mamba_cache_size is set."""

    workload: Workload
    token_equiv: float
    state_bytes_per_slot: float
    kv_bytes_per_token: float
    rest_gib: float
    target_ratio: float
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    predicted: Prediction
    observed: Prediction
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def option(self) -> tuple[str, float | int]:
        """The recipe option to store, as (name, value)."""
        if self.max_mamba_cache_size is not None:
            return "max_mamba_cache_size", self.max_mamba_cache_size
        assert self.mamba_full_memory_ratio is not None
        return "mamba_full_memory_ratio", self.mamba_full_memory_ratio

    @property
    def flag(self) -> str:
        name, value = self.option
        return (
            f"--{name.replace('_', '-')} {value:g}"
            if isinstance(value, float)
            else f"--{name.replace('_', '-')} {value}"
        )


def _round_up(r: float) -> float:
    # Up, not nearest: a starved state pool refuses requests, a short KV pool only retracts.
    return math.ceil(r * 100 - 1e-9) / 100


def _limiting(kda_cap: int, kv_cap: int) -> str:
    if abs(kda_cap - kv_cap) <= BALANCED_WITHIN * max(kda_cap, kv_cap, 1):
        return "balanced"
    return "kda-state" if kda_cap < kv_cap else "kv"


def _sglang_max_running(kv_tokens: int, kda_cap: int, context_len: int | None) -> int:
    """kv_cache_configurator.resolve_max_num_reqs without a user --max-running-requests."""
    generic = kv_tokens // 2
    if context_len:
        generic = min(max(min(int(kv_tokens / context_len * 512), 4096), 2048), generic)
    return min(generic, kda_cap)


def _predict(log: BootLog, w: Workload, slots: int, kv_tokens: int, state_gib: float) -> Prediction:
    kda_cap = slots // w.slots
    kv_cap = int(kv_tokens * w.dcp // w.avg_request_len)
    context_len = log.scheduler.context_len if log.scheduler else None
    return Prediction(
        mamba_slots=slots,
        state_gib=state_gib,
        kv_tokens=kv_tokens,
        kv_gib=kv_tokens * log.kv.kv_bytes_per_token / GIB,
        kda_request_cap=kda_cap,
        kv_request_cap=kv_cap,
        max_running_requests=_sglang_max_running(kv_tokens, kda_cap, context_len),
        limiting_pool=_limiting(kda_cap, kv_cap),
    )


def predict_ratio(log: BootLog, w: Workload, r: float) -> Prediction:
    per_slot, per_token = log.mamba.state_bytes_per_slot, log.kv.kv_bytes_per_token
    rest = (log.mamba.total_gib + log.kv.kv_gib) * GIB
    budget = rest * r / (1 + r)
    slots = int(budget // (per_slot * (1 + w.draft_tokens / w.slots)))
    state = (slots + (slots // w.slots) * w.draft_tokens) * per_slot
    return _predict(log, w, slots, int((rest - state) // per_token), state / GIB)


def predict_pin(log: BootLog, w: Workload, pin: int) -> Prediction:
    per_slot, per_token = log.mamba.state_bytes_per_slot, log.kv.kv_bytes_per_token
    rest = (log.mamba.total_gib + log.kv.kv_gib) * GIB
    running = pin // w.slots if w.concurrency is None else min(w.concurrency, pin // w.slots)
    state = (pin + running * w.draft_tokens) * per_slot
    if state >= rest:
        raise SizingError(
            f"pinning {pin} state slots needs {state / GIB:.2f} GiB per GPU, but the two pools share "
            f"only {rest / GIB:.2f} GiB: lower --concurrency or raise --mem-fraction-static"
        )
    return _predict(log, w, pin, int((rest - state) // per_token), state / GIB)


def observed(log: BootLog, w: Workload) -> Prediction:
    """The split the boot log shows, judged for this workload."""
    return _predict(log, w, log.mamba.max_mamba_cache_size, log.kv.tokens, log.mamba.total_gib)


def size_pools(log: BootLog, w: Workload) -> Plan:
    r = target_ratio(log.token_equiv, w.avg_request_len, w.slots, w.draft_tokens, w.dcp)
    notes: list[str] = []
    ratio: float | None = None
    pin: int | None = None
    if r < PIN_BELOW:
        if w.concurrency is None:
            raise SizingError(
                f"the balanced ratio is {r:.3f}, below {PIN_BELOW}: too small to hold steady, so the "
                "state pool must be pinned instead; pass --concurrency C to get "
                f"--max-mamba-cache-size = C x {w.slots}"
            )
        pin = w.concurrency * w.slots
        predicted = predict_pin(log, w, pin)
        notes.append(
            f"balanced ratio {r:.3f} is below {PIN_BELOW}: pin {w.concurrency} requests x {w.slots} "
            f"slots = --max-mamba-cache-size {pin}; the rest of the memory goes to the KV pool"
        )
    else:
        ratio = _round_up(r)
        predicted = predict_ratio(log, w, ratio)
    notes += _caveats(log, w)
    return Plan(
        workload=w,
        token_equiv=log.token_equiv,
        state_bytes_per_slot=log.mamba.state_bytes_per_slot,
        kv_bytes_per_token=log.kv.kv_bytes_per_token,
        rest_gib=log.mamba.total_gib + log.kv.kv_gib,
        target_ratio=r,
        mamba_full_memory_ratio=ratio,
        max_mamba_cache_size=pin,
        predicted=predicted,
        observed=observed(log, w),
        notes=tuple(notes),
    )


def _caveats(log: BootLog, w: Workload) -> list[str]:
    notes: list[str] = []
    if log.capped is not None:
        notes.append(log.capped.plain())
        if log.capped.slots_per_request != w.slots:
            notes.append(
                f"the log's server held {log.capped.slots_per_request} state slots per request but this "
                f"sizing assumes {w.slots}: pick the --radix-mode the server will run with"
            )
    if log.mamba.speculative and w.draft_tokens == 0:
        notes.append(
            "the log's state pool carries speculative intermediate state, but the sizing uses 0 draft "
            "tokens (right only for high-throughput or ReplaySSM verification)"
        )
    if w.dcp > 1 and w.draft_tokens > 0:
        notes.append(
            "with DCP and speculative decoding the draft KV pool is not sharded by dcp, so the ratio "
            "overstates DCP's saving: check the KV request cap after the next boot"
        )
    if log.other_kv_pools:
        extra = sum(p.kv_gib for p in log.other_kv_pools)
        notes.append(f"another KV pool ({extra:.2f} GiB, e.g. the draft model's) is outside the split")
    if log.mamba.state_gib < 0.1 or log.kv.kv_gib < 0.1:
        notes.append("a pool under 0.1 GiB is printed to 2 decimals only: the per-slot figures are rough")
    return notes
