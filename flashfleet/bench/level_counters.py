"""The servers' own counters around each level: what the server did, beside what the client saw.

Read from every server's /metrics just before a level's measured requests (after its warm-up)
and just after; the deltas go into summary.json and the report. The prefix-cache hit rate is
sglang:cached_tokens_total (every tier) over sglang:prompt_tokens_total, both counted where the
prompt is prefilled (the prefill servers under PD). A cold level that shows hits measured a cache
something else warmed, and is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flashfleet.bench.servers import (
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    Counters,
    FetchMany,
    Server,
    read_counters,
)

# sglang 0.5.23 srt/observability/metrics_collector.py: prompt tokens served from the prefix cache
CACHED_TOKENS = "sglang:cached_tokens_total"
LEVEL_COUNTERS = (PROMPT_TOKENS, CACHED_TOKENS, GENERATION_TOKENS, REQUESTS)
# A cold level's hits above this share of its prompt tokens are flagged. Below it: the tokens
# every prompt shares (a template's or tokenizer's first tokens) and the rare random-ids prompts
# whose random start coincides (about 1 in the vocabulary's size per pair of prompts).
COLD_HIT_WARN = 0.01


def _prompt_side(servers: Sequence[Server]) -> list[Server]:
    """Where prompts are prefilled and counted: the prefill servers under PD, else every server
    that takes generations."""
    prefill = [s for s in servers if s.role == "prefill"]
    return prefill or [s for s in servers if s.role not in ("decode", "encoder")]


def level_counters(
    servers: Sequence[Server], before: Mapping[str, Counters | str], after: Mapping[str, Counters | str]
) -> dict[str, Any]:
    """Per server its deltas (or why they are unknown); the totals and the hit rate."""
    per_server: dict[str, Any] = {}
    for server in servers:
        b, a = before.get(server.url), after.get(server.url)
        if not isinstance(b, dict) or not isinstance(a, dict):
            per_server[server.url] = str(a if isinstance(a, str) else b or "not read")
            continue
        per_server[server.url] = {name.split(":")[1]: a[name] - b.get(name, 0.0) for name in LEVEL_COUNTERS}
    prompt_side = [per_server[s.url] for s in _prompt_side(servers) if isinstance(per_server[s.url], dict)]
    known = [d for d in per_server.values() if isinstance(d, dict)]
    prompt = sum(d["prompt_tokens_total"] for d in prompt_side)
    cached = sum(d["cached_tokens_total"] for d in prompt_side)
    return {
        "prompt_tokens": prompt if prompt_side else None,
        "cached_tokens": cached if prompt_side else None,
        "generation_tokens": sum(d["generation_tokens_total"] for d in known) if known else None,
        "prefix_cache_hit_rate": cached / prompt if prompt_side and prompt > 0 else None,
        "servers": per_server,
    }


def cold_warning(concurrency: int, counters: Mapping[str, Any]) -> str | None:
    """The warning for a level meant to be cold whose prompts found their prefixes cached."""
    rate = counters.get("prefix_cache_hit_rate")
    if rate is None or rate <= COLD_HIT_WARN:
        return None
    return (
        f"concurrency {concurrency}: {rate:.1%} of its prompt tokens came from the prefix cache "
        f"({counters['cached_tokens']:,.0f} of {counters['prompt_tokens']:,.0f}), in a level meant to be "
        "cold: another client, a run replayed with the same seeds, or random-ids prompts whose random "
        "starts coincide"
    )


class LevelReads:
    """The driver's ``between`` hook: every server's counters around each level's measured
    requests, then the deltas per level."""

    def __init__(self, servers: Sequence[Server], fetch: FetchMany) -> None:
        self._servers = tuple(servers)
        self._fetch = fetch
        self._reads: dict[tuple[int, str], dict[str, Counters | str]] = {}

    def __call__(self, concurrency: int, when: str) -> None:
        if self._servers:
            self._reads[(concurrency, when)] = read_counters(self._servers, LEVEL_COUNTERS, self._fetch)

    def per_level(self) -> dict[int, dict[str, Any]]:
        return {
            c: level_counters(self._servers, self._reads[(c, "before")], self._reads[(c, "after")])
            for c, when in self._reads
            if when == "after" and (c, "before") in self._reads
        }
