"""The weights volume an AWS stack keeps as an EBS snapshot (``caches.weightsSnapshot``).

Decided here, once: which repositories the volume holds and at which commits (the cache key),
how large the volume is, how long a snapshot is kept. The AWS component
(flashfleet.components.weights_cache) restores the newest snapshot of the key into every GPU
node's weights volume and snapshots node 0's after the bring-up; `plan` models the second
bring-up from it. A key is only a key when every repository is pinned to a commit: the stack's
lock is required (a branch name such as ``main`` would restore last week's weights).
"""

from __future__ import annotations

import hashlib
import math

from pydantic import BaseModel, ConfigDict

from flashfleet.recipes import Recipe
from flashfleet.stack.errors import Problem
from flashfleet.stack.lock import StackLock, lock_file_name
from flashfleet.stack.spec import AwsSource, StackSpec

GIB = 1024**3
# Room beside the checkpoint: the compile caches (caches.jit) share the volume, and a repository
# downloaded again beside an older commit needs its files twice until the old ones are pruned.
HEADROOM = 1.10
HEADROOM_GIB = 64
DEVICE = "/dev/sdf"  # the weights volume's block-device name in the launch template


class WeightsSnapshotPlan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # the first 16 hex digits of the SHA-256 of the sorted `repo@commit` lines
    commits: dict[str, str]  # repository -> the locked commit the volume holds
    checkpoint_bytes: int  # every locked file of those commits, as the Hub lists them
    volume_gib: int
    keep_days: int
    initialization_rate_mibs: int | None
    device: str = DEVICE


def cache_key(commits: dict[str, str]) -> str:
    lines = "".join(f"{repo}@{commit}\n" for repo, commit in sorted(commits.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


def weights_snapshot(
    stack: str, spec: StackSpec, recipe: Recipe, lock: StackLock | None, base: str
) -> tuple[WeightsSnapshotPlan | None, list[Problem]]:
    """The stack's snapshot cache, or the one line that refuses it."""
    want = spec.caches.weights_snapshot
    if want is None:
        return None, []
    path = f"{base}.caches.weightsSnapshot"
    if not isinstance(spec.nodes.source, AwsSource):
        return None, [
            Problem(
                path, f"EBS snapshots are for nodes.source kind aws, not {spec.nodes.source.kind}", "aws-only"
            )
        ]
    if spec.weights.prestaged:
        return None, [
            Problem(
                path,
                "weights.prestaged: the weights are already on the nodes, nothing to snapshot",
                "prestaged",
            )
        ]
    unlocked = [r for r in recipe.repositories if lock is None or r not in lock.weights]
    if lock is None or unlocked:
        return None, [
            Problem(
                path,
                f"a snapshot is keyed by the commit of every repository it holds, and "
                f"{lock_file_name(stack)} does not pin {', '.join(unlocked)}: run `flashfleet lock {stack}`",
                "locked-weights",
            )
        ]
    commits = {repo: lock.weights[repo].commit for repo in recipe.repositories}
    size = sum(f.size for repo in recipe.repositories for f in lock.weights[repo].files.values())
    plan = WeightsSnapshotPlan(
        key=cache_key(commits),
        commits=commits,
        checkpoint_bytes=size,
        volume_gib=math.ceil(size * HEADROOM / GIB) + HEADROOM_GIB,
        keep_days=want.keep_days,
        initialization_rate_mibs=want.initialization_rate_mibs,
    )
    return plan, []
