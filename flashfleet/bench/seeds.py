"""The seeds of one run: a fresh one per level and per warm-up, derived from the run's id.

bench_serving seeds its prompt generator with --seed (default 42), so two runs with the same
seed send the same prompts, and a smaller level's prompts are the first prompts of a larger
one: every level after the first, and every repeated run, would measure a prefix cache the
earlier one warmed. A seed per level and per warm-up, derived from an id drawn once per run,
keeps each level cold; the id and the seeds are recorded with the method, so a run can be
told apart from (and, on an emptied cache, replayed as) another.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

SEED_LIMIT = 2**31  # bench_serving passes --seed to numpy.random.seed, which takes < 2**32


@dataclass(frozen=True)
class LevelSeeds:
    concurrency: int
    measured: int
    warmup: int


def new_run_id() -> str:
    return secrets.token_hex(8)


def _seed(run_id: str, index: int, role: str, salt: int) -> int:
    digest = hashlib.sha256(f"{run_id}/{index}/{role}/{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_LIMIT


def level_seeds(run_id: str, concurrency: tuple[int, ...]) -> tuple[LevelSeeds, ...]:
    """One measured and one warm-up seed per level, all different within the run."""
    used: set[int] = set()

    def fresh(index: int, role: str) -> int:
        salt = 0
        while (seed := _seed(run_id, index, role, salt)) in used:
            salt += 1
        used.add(seed)
        return seed

    return tuple(
        LevelSeeds(c, measured=fresh(i, "measured"), warmup=fresh(i, "warmup"))
        for i, c in enumerate(concurrency)
    )
