"""Read the two memory pools (and the scheduler limits) out of a whole SGLang boot log.

Line formats are those sglang 0.5.23 prints:
- ``srt/mem_cache/memory_pool.py`` (MambaPool): ``Mamba Cache is allocated. max_mamba_cache_size: N,
  conv_state size: X.XXGB, ssm_state size: Y.YYGB`` plus, with speculative decoding,
  ``intermediate_ssm_state_cache size: ..GB intermediate_conv_window_cache size: ..GB``;
- ``srt/mem_cache/memory_pool.py`` (KVCache): ``KV Cache is allocated. dtype: D, #tokens: N,
  K size: X GB, V size: Y GB`` (MHA) or ``... KV size: X GB`` (MLA); older builds omit ``dtype:``;
- ``srt/managers/scheduler.py``: ``max_total_num_tokens=N, chunked_prefill_size=..,
  max_prefill_tokens=.., max_running_requests=N, context_len=N, available_gpu_mem=.. GB``;
- ``srt/mem_cache/kv_cache_configurator.py``: ``max_running_requests is capped to N by the mamba
  state cache (max_mamba_cache_size=M, S state slots per request)``.

Sizes are printed in GiB (sglang's ``GB = 1024**3``). Every rank prints its own copy, prefixed
``[time TP3 EP3]``; copies must agree. Within one rank the first KV line is the target model's
pool: a speculative draft model allocates its own, smaller, KV pool afterwards.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from flashfleet.sizing.errors import SizingError

GIB = 1024**3

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# "[2026-11-03 10:12:01.123 DP0 TP3 EP3]": the rank words sglang's logger puts after the time.
_RANK = re.compile(
    r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)+)\]"
)
_MAMBA = re.compile(
    r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<slots>\S+?), "
    r"conv_state size: (?P<conv>\S+?) ?GB, ssm_state size: (?P<ssm>\S+?) ?GB"
    r"(?: intermediate_ssm_state_cache size: (?P<issm>\S+?) ?GB"
    r" intermediate_conv_window_cache size: (?P<iconv>\S+?) ?GB)?"
)
# A word right before "KV Cache" is an allocation label (SWA, Full, draft pools of other models):
# only the unlabelled pool is the one the ratio splits against.
_KV = re.compile(
    r"(?P<label>\b\w+ )?KV Cache is allocated\. (?:dtype: (?P<dtype>[^,]+), )?#tokens: (?P<tokens>\S+?), "
    r"(?:K size: (?P<k>\S+?) ?GB, V size: (?P<v>\S+?) ?GB|KV size: (?P<kv>\S+?) ?GB)"
)
_SCHED = re.compile(
    r"max_total_num_tokens=(?P<tokens>[^,\s]+),.*?max_running_requests=(?P<reqs>[^,\s]+)"
    r"(?:, context_len=(?P<ctx>[^,\s]+))?"
)
_CAPPED = re.compile(
    r"max_running_requests is capped to (?P<cap>\S+) by the mamba state cache "
    r"\(max_mamba_cache_size=(?P<slots>[^,\s]+), (?P<per_req>\S+) state slots per request\)"
)


@dataclass(frozen=True)
class MambaPool:
    """The KDA (mamba) state pool of one rank."""

    max_mamba_cache_size: int
    conv_state_gib: float
    ssm_state_gib: float
    intermediate_ssm_gib: float | None = None
    intermediate_conv_gib: float | None = None

    @property
    def speculative(self) -> bool:
        return self.intermediate_ssm_gib is not None

    @property
    def state_gib(self) -> float:
        return self.conv_state_gib + self.ssm_state_gib

    @property
    def total_gib(self) -> float:
        """Everything the pool holds, intermediate speculative state included."""
        return self.state_gib + (self.intermediate_ssm_gib or 0.0) + (self.intermediate_conv_gib or 0.0)

    @property
    def state_bytes_per_slot(self) -> float:
        return self.state_gib * GIB / self.max_mamba_cache_size


@dataclass(frozen=True)
class KvPool:
    """The paged KV pool of one rank (MHA prints K and V, MLA one KV size)."""

    tokens: int
    kv_gib: float
    dtype: str | None = None
    layout: str = "mla"  # mla | mha

    @property
    def kv_bytes_per_token(self) -> float:
        return self.kv_gib * GIB / self.tokens


@dataclass(frozen=True)
class SchedulerLimits:
    max_total_num_tokens: int
    max_running_requests: int
    context_len: int | None = None


@dataclass(frozen=True)
class MambaCap:
    """SGLang's warning that the state pool, not the KV pool, set max_running_requests."""

    capped_to: int
    max_mamba_cache_size: int
    slots_per_request: int

    def plain(self) -> str:
        return (
            f"SGLang capped max_running_requests at {self.capped_to} because of the KDA state pool: it "
            f"holds {self.max_mamba_cache_size} slots and each running request needs "
            f"{self.slots_per_request}; a larger --mamba-full-memory-ratio or a --max-mamba-cache-size "
            "pin lifts the cap"
        )


@dataclass(frozen=True)
class BootLog:
    mamba: MambaPool
    kv: KvPool
    scheduler: SchedulerLimits | None = None
    capped: MambaCap | None = None
    ranks: tuple[str, ...] = ()
    other_kv_pools: tuple[KvPool, ...] = field(default_factory=tuple)

    @property
    def token_equiv(self) -> float:
        """KV tokens one state slot costs as much memory as."""
        return self.mamba.state_bytes_per_slot / self.kv.kv_bytes_per_token


def _number(text: str, what: str, kind: type[int] | type[float] = float) -> float:
    try:
        value = float(text) if kind is float else int(text)
    except ValueError:
        raise SizingError(f"boot log: cannot read {what} from {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise SizingError(f"boot log: {what} {text!r} is not a usable size")
    return value


def _int(text: str, what: str) -> int:
    return int(_number(text, what, int))


def _opt(text: str | None, what: str) -> float | None:
    return None if text is None else _number(text, what)


def clean_line(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n")


def rank_of(line: str) -> str:
    """The rank words of a log line ('TP3 EP3'), or '' for a line without them."""
    m = _RANK.search(line)
    return m.group("ranks").strip() if m else ""


def _mamba(m: re.Match[str]) -> MambaPool:
    slots = _int(m["slots"], "max_mamba_cache_size")
    if slots <= 0:
        raise SizingError(f"boot log: max_mamba_cache_size is {slots}; the state pool has no slots")
    return MambaPool(
        max_mamba_cache_size=slots,
        conv_state_gib=_number(m["conv"], "conv_state size"),
        ssm_state_gib=_number(m["ssm"], "ssm_state size"),
        intermediate_ssm_gib=_opt(m["issm"], "intermediate_ssm_state_cache size"),
        intermediate_conv_gib=_opt(m["iconv"], "intermediate_conv_window_cache size"),
    )


def _kv(m: re.Match[str]) -> KvPool:
    tokens = _int(m["tokens"], "KV #tokens")
    if tokens <= 0:
        raise SizingError(f"boot log: the KV pool has #tokens: {tokens}")
    if m["kv"] is not None:
        size, layout = _number(m["kv"], "KV size"), "mla"
    else:
        size, layout = _number(m["k"], "K size") + _number(m["v"], "V size"), "mha"
    dtype = m["dtype"].strip() if m["dtype"] else None
    return KvPool(tokens=tokens, kv_gib=size, dtype=dtype, layout=layout)


def _sched(m: re.Match[str]) -> SchedulerLimits:
    ctx = m["ctx"]
    return SchedulerLimits(
        max_total_num_tokens=_int(m["tokens"], "max_total_num_tokens"),
        max_running_requests=_int(m["reqs"], "max_running_requests"),
        context_len=None if ctx is None else _int(ctx, "context_len"),
    )


def _capped(m: re.Match[str]) -> MambaCap:
    return MambaCap(
        capped_to=_int(m["cap"], "the capped max_running_requests"),
        max_mamba_cache_size=_int(m["slots"], "max_mamba_cache_size"),
        slots_per_request=_int(m["per_req"], "state slots per request"),
    )


T = TypeVar("T")


def _agree(found: dict[str, list[T]], what: str, *, first_per_rank: bool) -> T | None:
    """One value for a line every rank prints; contradicting ranks are an error."""
    picked: dict[str, T] = {}
    for rank, values in found.items():
        candidates = values[:1] if first_per_rank else values
        for value in candidates:
            if rank in picked and picked[rank] != value and not first_per_rank:
                raise SizingError(f"boot log: rank {rank or '(untagged)'} prints two different {what} lines")
            picked.setdefault(rank, value)
    distinct = list(dict.fromkeys(picked.values()))
    if len(distinct) > 1:
        shown = "; ".join(f"{r or '(untagged)'}: {v}" for r, v in picked.items())
        raise SizingError(f"boot log: ranks disagree on the {what} line ({shown})")
    return distinct[0] if distinct else None


def parse_boot_log(lines: Iterable[str]) -> BootLog:
    """Parse a whole boot log; raise SizingError when a pool line is missing or contradictory."""
    found: dict[str, dict[str, list[object]]] = {k: {} for k in ("mamba", "kv", "sched", "capped")}
    extra_kv: list[KvPool] = []
    ranks: dict[str, None] = {}
    patterns: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], object]], ...] = (
        ("mamba", _MAMBA, _mamba),
        ("kv", _KV, _kv),
        ("sched", _SCHED, _sched),
        ("capped", _CAPPED, _capped),
    )
    for raw in lines:
        line = clean_line(raw)
        for key, pattern, build in patterns:
            m = pattern.search(line)
            if m is None:
                continue
            if key == "kv" and m["label"] is not None:
                break  # a labelled pool (SWA/Full/...) is not the one the ratio splits against
            rank = rank_of(line)
            ranks.setdefault(rank)
            bucket = found[key].setdefault(rank, [])
            value = build(m)
            if isinstance(value, KvPool) and bucket and value != bucket[0] and value not in extra_kv:
                extra_kv.append(value)  # a draft model's pool, allocated after the target's
            bucket.append(value)
            break
    mamba = _agree(found["mamba"], "Mamba Cache is allocated", first_per_rank=True)
    kv = _agree(found["kv"], "KV Cache is allocated", first_per_rank=True)
    missing = [
        text
        for text, value in (
            ("'Mamba Cache is allocated.'", mamba),
            ("'KV Cache is allocated.'", kv),
        )
        if value is None
    ]
    if missing:
        raise SizingError(
            f"boot log has no {' or '.join(missing)} line: pass the whole log of one server start"
        )
    assert isinstance(mamba, MambaPool)
    assert isinstance(kv, KvPool)
    sched = _agree(found["sched"], "max_total_num_tokens", first_per_rank=False)
    capped = _agree(found["capped"], "max_running_requests is capped", first_per_rank=False)
    return BootLog(
        mamba=mamba,
        kv=kv,
        scheduler=sched if isinstance(sched, SchedulerLimits) else None,
        capped=capped if isinstance(capped, MambaCap) else None,
        ranks=tuple(r for r in ranks if r),
        other_kv_pools=tuple(extra_kv),
    )


def read_boot_log(text: str) -> BootLog:
    return parse_boot_log(text.splitlines())
