"""Time to the first token, modeled phase by phase: the first bring-up of a stack, and the second
(the same stack brought up again after `flashfleet down`, with what `down` keeps).

The node launch comes first; then the transfers on the critical path's lanes (driver, image,
weights: flashfleet.planning.critical_path); then, one after another, the weights loaded into GPU
memory, JIT builds and autotune, CUDA-graph capture, and readiness up to the first answered
request. Each figure comes from flashfleet/catalog/bringup.toml ([startup]) with its basis and a
public source, unless a bring-up of the stack was recorded here: its servers' own load, capture
and readiness then replace the model's (basis "measured"). A phase without a figure is unknown,
and the totals then say how much is known (a lower bound) and which phases are missing. Each
lever (a recipe option or a stack setting that changes the time) is shown with both bring-ups as
they would be with it the other way.
"""

from __future__ import annotations

from typing import Any

from flashfleet.catalog import bringup_catalog
from flashfleet.planning.critical_path import source_kind
from flashfleet.planning.kernel_cache import kept_volume, kernel_caches, second_bringup
from flashfleet.planning.plan_model import (
    BringupTime,
    CriticalPath,
    Lever,
    MeasuredStartup,
    StartupPhase,
    TimeToFirstToken,
)
from flashfleet.planning.resolve import StackPlan

TRANSFERS = ("driver", "image", "weights", "fanout")  # fanout: the seed's peers, after its download
SAME = "as in the first bring-up"


def _lanes_total(lanes: list[list[str]], seconds: dict[str, float | None]) -> tuple[float | None, float]:
    """(the transfers' end, None if a phase is unknown; the end of what is known)."""
    ends = [sum(seconds[name] or 0.0 for name in lane) for lane in lanes]
    known = max(ends, default=0.0)
    unknown = any(seconds[name] is None for lane in lanes for name in lane)
    return (None if unknown else known), known


def _time(phases: list[StartupPhase], lanes: list[list[str]], second: bool) -> BringupTime:
    seconds = {p.name: p.second_s if second else p.first_s for p in phases}
    transfers, transfers_known = _lanes_total(lanes, seconds)
    # one after another: launch, load, jit, capture, ready, and peers where options.peer_load is on
    serial = [p.name for p in phases if p.name not in TRANSFERS]
    known = transfers_known + sum(seconds[n] or 0.0 for n in serial)
    unknown = [p.name for p in phases if seconds[p.name] is None]
    timed = {n: s for n, s in seconds.items() if s}
    return BringupTime(
        total_s=None if unknown or transfers is None else round(known, 1),
        known_s=round(known, 1),
        unknown=unknown,
        dominant=max(timed, key=lambda n: timed[n]) if timed else None,
    )


def _figure(entry: dict[str, Any], key: str = "seconds") -> tuple[float | None, str | None]:
    value = entry.get(key)
    return (None, None) if value is None else (float(value), entry["basis"])


def _load(plan: StackPlan, prefetch: bool, restored: bool) -> StartupPhase:
    cat = bringup_catalog()
    load = cat["startup"]["load"]
    sizes = [cat["checkpoint"][repo].get("size_gb") for repo in plan.recipe.repositories]
    seconds = None
    if all(s is not None for s in sizes):
        per_gb = float(load["prefetch_s" if prefetch else "cold_s"]) / float(load["size_gb"])
        seconds = round(per_gb * sum(float(s) for s in sizes), 1)
    how = "with checkpoint prefetch (weight_prefetch=on)" if prefetch else "without checkpoint prefetch"
    second, note = seconds, "loaded cold again: a warm page cache is not counted on"
    if restored:
        second, note = _restored_load(plan, seconds, [s for s in sizes if s is not None])
    return StartupPhase(
        name="load",
        first_s=seconds,
        second_s=second,
        basis=load["basis"] if seconds is not None else None,
        source=f"{how}: {load['source']}",
        second_source=note,
    )


def _restored_load(plan: StackPlan, load_s: float | None, sizes: list[float]) -> tuple[float | None, str]:
    """The load from a volume restored from a snapshot: each block comes from S3 at its first
    read, at the provisioned initialization rate if the stack sets one, else at a rate AWS does
    not publish (unknown)."""
    restore = bringup_catalog()["startup"]["restore"]
    cache = plan.spec.caches.weights_snapshot
    rate = cache.initialization_rate_mibs if cache is not None else None
    if rate is None:
        return None, f"unknown: lazy loading, {restore['source']}"
    if load_s is None:
        return None, f"unknown: the load's own figure is unknown; {restore['source']}"
    fetch_s = round(sum(sizes) * 1e9 / (rate * 2**20), 1)
    return max(load_s, fetch_s), (
        f"the slower of the load and the volume's initialization at {rate} MiB/s "
        f"(caches.weightsSnapshot.initializationRateMibs: {fetch_s} s): {restore['source']}"
    )


def _second_transfer(
    plan: StackPlan, kind: str, name: str, first: float | None, *, keep: bool, snapshot: bool
) -> tuple[float | None, str]:
    """The second bring-up's driver, image, weights or weights fan-out phase, and why."""
    if name in ("weights", "fanout") and plan.spec.weights.prestaged:
        return 0.0, "prestaged on the node"
    if name in ("weights", "fanout") and snapshot:
        return 0.0, "restored from the EBS snapshot the first bring-up made (caches.weightsSnapshot)"
    if kind == "aws":
        return first, "a new instance and volume: " + SAME
    if name == "driver":
        if kind == "existing":
            return 0.0, "installed by the first bring-up: the role only checks it"
        return first, SAME
    if name == "image":
        if kind == "existing":
            return 0.0, "kept on the node: `down` removes containers and units, not images"
        return 0.0, "in the node's image cache (until the kubelet's image garbage collection)"
    kept, why = kept_volume(plan, kind, keep)
    return (0.0, f"kept: {why}") if kept else (first, f"downloaded again: {why}")


def _jit(plan: StackPlan, kind: str, *, jit_cache: bool, keep: bool, snapshot: bool) -> StartupPhase:
    jit = bringup_catalog()["startup"]["jit"][plan.vendor]
    first, basis = _figure(jit, "first_s")
    cached, _ = _figure(jit, "cached_s")
    warmth, note = second_bringup(plan, kind, jit_cache=jit_cache, keep=keep, snapshot=snapshot)
    return StartupPhase(
        name="jit",
        first_s=first,
        second_s=cached if warmth == "warm" else first,
        basis=basis,
        source=jit["source"],
        second_source=note,
    )


def peer_load_applies(plan: StackPlan) -> bool:
    """Where options.peer_load may be on: replicas of one unified node each, off Kubernetes (the
    rules and planning refuse it elsewhere)."""
    o = plan.recipe.options
    one_node_replicas = o.replicas > 1 and o.nodes == 1 and plan.recipe.topology == "unified"
    return one_node_replicas and source_kind(plan) != "kubernetes"


def peer_load_setting(plan: StackPlan) -> str:
    """options.peer_load as the stack has it, or, where it is off, what it would be turned on to:
    nccl on AWS nodes (planning refuses the TransferEngine's RDMA there), else on."""
    setting = plan.recipe.options.peer_load
    if setting != "off":
        return setting
    return "nccl" if source_kind(plan) == "aws" else "on"


def _peers(plan: StackPlan) -> StartupPhase:
    """options.peer_load: the router serves once every replica is ready, after the first
    replica's readiness. Over the TransferEngine (on) the others read from the first all at once,
    sharing its links; over NCCL each loads from the one before it (a seed sends to one loader at
    a time), so their loads add up."""
    n = plan.recipe.options.replicas - 1
    if peer_load_setting(plan) == "nccl":
        how = (
            f"{n} replica(s) after the first, one after another, each loading the weights from the one "
            "before it GPU to GPU over NCCL"
        )
    else:
        how = (
            f"{n} replica(s) after the first, all at once, each reading the weights from the first "
            "replica's GPUs over Mooncake's TransferEngine (they share its links)"
        )
    why = (
        f"unknown: {how}, then its JIT, capture and readiness; the remote-instance loader's "
        "throughput has no public figure"
    )
    return StartupPhase(name="peers", first_s=None, second_s=None, basis=None, source=why, second_source=SAME)


def _measured(phase: StartupPhase, m: MeasuredStartup) -> StartupPhase:
    """The phase with the recorded run's figure where the run has one (the JIT's stays modeled:
    the run does not say whether its kernel cache was cold)."""
    where = f"run {m.run}, the slowest of {m.servers} servers' own log"
    if phase.name == "jit":
        return phase.model_copy(update={"source": f"{phase.source}; measured {m.jit_s} s in {where}"})
    value = {"load": m.load_s, "capture": m.capture_s, "ready": m.ready_s}.get(phase.name)
    if value is None:
        return phase
    return phase.model_copy(
        update={
            "first_s": value,
            "second_s": value,
            "basis": "measured",
            "source": f"measured in {where} (model: {phase.source})",
            "second_source": SAME,
        }
    )


def _phases(
    plan: StackPlan,
    cp: CriticalPath,
    *,
    prefetch: bool,
    keep: bool,
    jit_cache: bool,
    snapshot: bool,
    peers: bool = False,
    measured: MeasuredStartup | None = None,
) -> list[StartupPhase]:
    startup = bringup_catalog()["startup"]
    kind = source_kind(plan)
    launch = startup["launch"][kind]
    seconds, basis = _figure(launch)
    out = [
        StartupPhase(
            name="launch",
            first_s=seconds,
            second_s=seconds,
            basis=basis,
            source=launch["source"],
            second_source=SAME,
        )
    ]
    by_name = {p.name: p for p in cp.phases}
    for name in (n for n in TRANSFERS if n in by_name):  # Kubernetes: the cluster has the driver
        p = by_name[name]
        second, why = _second_transfer(plan, kind, name, p.seconds, keep=keep, snapshot=snapshot)
        basis = p.basis if p.size_gb is not None else ("assumed" if p.seconds is not None else None)
        out.append(
            StartupPhase(
                name=name, first_s=p.seconds, second_s=second, basis=basis, source=p.source, second_source=why
            )
        )
    out.append(_load(plan, prefetch, snapshot))
    out.append(_jit(plan, kind, jit_cache=jit_cache, keep=keep, snapshot=snapshot))
    for name in ("capture", "ready"):
        entry = startup[name]
        seconds, basis = _figure(entry)
        out.append(
            StartupPhase(
                name=name,
                first_s=seconds,
                second_s=seconds,
                basis=basis,
                source=entry["source"],
                second_source=SAME,
            )
        )
    if peers:
        out.append(_peers(plan))
    return out if measured is None else [_measured(p, measured) for p in out]


def time_to_first_token(
    plan: StackPlan, cp: CriticalPath, measured: MeasuredStartup | None = None
) -> TimeToFirstToken:
    """The model, with a recorded run's own figures where ``measured`` gives them (they ran with
    the stack's own settings: a lever flipped away from them is modeled)."""
    prefetch = plan.recipe.options.weight_prefetch == "on"
    keep = plan.spec.keeps_caches
    jit_cache = plan.spec.caches.jit
    kind = source_kind(plan)
    snapshot = plan.weights_snapshot is not None
    peers = plan.recipe.options.peer_load != "off"

    def both(
        p: bool, k: bool, j: bool, s: bool = snapshot, pl: bool = peers
    ) -> tuple[BringupTime, BringupTime]:
        # the run's load was with the stack's own prefetch and peer loading
        own = measured if (p, pl) == (prefetch, peers) else None
        phases = _phases(plan, cp, prefetch=p, keep=k, jit_cache=j, snapshot=s, peers=pl, measured=own)
        return _time(phases, cp.lanes, False), _time(phases, cp.lanes, True)

    phases = _phases(
        plan, cp, prefetch=prefetch, keep=keep, jit_cache=jit_cache, snapshot=snapshot, peers=peers,
        measured=measured,
    )  # fmt: skip

    def option(name: str, on: bool, times: tuple[BringupTime, BringupTime]) -> Lever:
        """A recipe option not in the seed's commands, with both bring-ups as they would be with
        it flipped: on, the recipe is Not Verified."""
        badge = (
            "the measured command's badge, if nothing else changed"
            if on
            else ("Not Verified (not in the seed's commands)")
        )
        return Lever(name=name, where="recipe option", setting="on" if on else "off",
                     other="off" if on else "on", badge=badge, first=times[0], second=times[1])  # fmt: skip

    levers = [option("weight_prefetch", prefetch, both(not prefetch, keep, jit_cache))]

    def switch(name: str, setting: bool, badge: str, times: tuple[BringupTime, BringupTime]) -> Lever:
        """A stack-file switch, with both bring-ups as they would be with it flipped."""
        other = str(not setting).lower()
        return Lever(name=name, where="stack file", setting=str(setting).lower(), other=other, badge=badge,
                     first=times[0], second=times[1])  # fmt: skip

    levers.append(
        switch(
            "caches.jit",
            jit_cache,
            "none: the command is the same, only where its compile caches live moves",
            both(prefetch, keep, not jit_cache),
        )
    )
    if kind == "aws" and not plan.spec.weights.prestaged:
        flipped = both(prefetch, keep, jit_cache, not snapshot)
        levers.append(
            Lever(
                name="caches.weightsSnapshot",
                where="stack file",
                setting="on" if snapshot else "off",
                other="off" if snapshot else "on (without an initialization rate)",
                badge="none: the command is the same, only where its weights come from moves",
                first=flipped[0],
                second=flipped[1],
            )
        )
    if peers or peer_load_applies(plan):
        lever = option("peer_load", peers, both(prefetch, keep, jit_cache, snapshot, not peers))
        setting = peer_load_setting(plan)
        levers.append(lever.model_copy(update={"setting": setting} if peers else {"other": setting}))
    if kind == "existing" and not plan.spec.weights.prestaged:
        levers.append(
            switch(
                "teardown.keepCaches",
                keep,
                "none: the badge is the recipe's",
                both(prefetch, not keep, jit_cache),
            )
        )
    return TimeToFirstToken(
        node_source=kind,
        phases=phases,
        first=_time(phases, cp.lanes, False),
        second=_time(phases, cp.lanes, True),
        levers=levers,
        measured=measured,
        kernels=kernel_caches(plan),
    )
