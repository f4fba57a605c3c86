"""The bring-up's critical path, modeled: on a real cluster it is made of transfers.

Per phase (driver install, image pull, weights download) a duration from the catalog's sizes and
the stated bandwidths (flashfleet/catalog/bringup.toml, overridden under the stack's `bringup:`),
placed on the schedule the playbooks (or manifests) really follow: lanes side by side, the
phases of one lane one after another, every node at once; the total is where the longest lane
ends. Each size carries its basis (published, or an estimate from comparable artifacts). A size
no source gives stays unknown, and so does every figure that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flashfleet.catalog import bringup_catalog
from flashfleet.planning.plan_model import CriticalPath, PhaseView
from flashfleet.planning.resolve import StackPlan
from flashfleet.planning.weights_fanout import fanout_seed
from flashfleet.stack.kubernetes_source import KubernetesSource
from flashfleet.stack.spec import AwsSource

GBIT_PER_GB = 8.0
BASES = ("published", "estimate")


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float | None  # None: a size is unknown
    size_gb: float | None
    gbps: float | None
    source: str
    start_s: float | None = None
    basis: str | None = None  # of the size: "published" or "estimate"; None without a size

    @property
    def end_s(self) -> float | None:
        if self.start_s is None or self.seconds is None:
            return None
        return self.start_s + self.seconds


def source_kind(plan: StackPlan) -> str:
    src = plan.spec.nodes.source
    if isinstance(src, KubernetesSource):
        return "kubernetes"
    return "aws" if isinstance(src, AwsSource) else "existing"


def _size(what: str, entry: dict[str, Any]) -> tuple[str, float | None, str, str | None]:
    """(what, size or None, source, basis) of one catalog entry; a size states its basis."""
    size = entry.get("size_gb")
    basis = entry.get("basis")
    if size is not None and basis not in BASES:
        raise ValueError(f"bringup.toml: {what}.basis must be one of {', '.join(BASES)}, not {basis!r}")
    return what, size, entry["source"], basis if size is not None else None


def _transfer(name: str, sizes: list[tuple[str, float | None, str, str | None]], gbps: float) -> Phase:
    known = [s for _, s, _, _ in sizes]
    source = "; ".join(f"{what}: {src}" for what, _, src, _ in sizes)
    if any(s is None for s in known):
        return Phase(name, None, None, gbps, source)
    size = float(sum(s for s in known if s is not None))
    basis = "estimate" if any(b == "estimate" for _, _, _, b in sizes) else "published"
    return Phase(name, round(size * GBIT_PER_GB / gbps, 1), size, gbps, source, basis=basis)


def _phases(plan: StackPlan) -> dict[str, Phase]:
    cat = bringup_catalog()
    kind = source_kind(plan)
    defaults = cat["source"][kind]
    over = plan.spec.bringup
    src = plan.spec.nodes.source
    driver_s = over.driver_install_s
    driver_src = "the stack's bringup.driverInstallS"
    if driver_s is None:
        custom_ami = isinstance(src, AwsSource) and src.ami is not None
        driver_s = defaults["custom_ami_driver_install_s" if custom_ami else "driver_install_s"]
        driver_src = defaults["source"]
    image = cat["image"][plan.vendor]
    image_gbps = over.bandwidth.image_gbps or defaults["image_gbps"]
    out = {
        "driver": Phase("driver", float(driver_s), None, None, driver_src),
        "image": _transfer("image", [_size(f"image.{plan.vendor}", image)], image_gbps),
    }
    if plan.spec.weights.prestaged:
        out["weights"] = Phase("weights", 0.0, 0.0, None, f"prestaged in {plan.spec.model_cache_dir}")
        return out
    sizes = [_size(r, cat["checkpoint"][r]) for r in plan.recipe.repositories]
    out["weights"] = _transfer("weights", sizes, over.bandwidth.weights_gbps or defaults["weights_gbps"])
    peers = len(plan.gpu_nodes) - 1
    if kind != "kubernetes" and fanout_seed(plan) is not None:
        # the seed's NIC sends every file to each peer: (peers x size) through one link
        fan = _transfer(
            "fanout", [(w, s, src, b) for w, s, src, b in sizes for _ in range(peers)], defaults["peer_gbps"]
        )
        source = (
            f"the seed sends the checkpoint to its {peers} peers over the cluster network, each file as "
            "soon as its own download completed and checked it, so beside that download (the last "
            f"file's copy after it is not modeled): {defaults['peer_source']}"
        )
        out["fanout"] = Phase(**{**fan.__dict__, "source": source})
    return out


def hub_asked(plan: StackPlan) -> tuple[float | None, int, str]:
    """(GB the stack asks of the Hub, how many nodes ask it, why): one node when the weights fan
    out (a locked stack of several GPU nodes), else each GPU node on its own."""
    if plan.spec.weights.prestaged:
        return 0.0, 0, f"prestaged in {plan.spec.model_cache_dir}"
    cat = bringup_catalog()
    known = [cat["checkpoint"][r].get("size_gb") for r in plan.recipe.repositories]
    size = None if None in known else float(sum(s for s in known if s is not None))
    gpu = len(plan.gpu_nodes)
    if source_kind(plan) == "kubernetes":
        why = (
            "Kubernetes: one Job with a ReadWriteMany claim, else each server pod "
            "(flashfleet/k8s/weights.py); not modeled"
        )
        return None, 0, f"{why}; {cat['hub']['source']}"
    if fanout_seed(plan) is not None:
        downloads, why = 1, "once per stack: the first GPU node downloads, the others fetch from it"
    else:
        downloads = gpu
        why = "each GPU node downloads on its own" + (
            " (no lock: a peer's copy would have no hashes to check it against; `flashfleet lock` makes one)"
            if gpu > 1
            else ""
        )
    return (None if size is None else round(size * downloads, 1)), downloads, f"{why}; {cat['hub']['source']}"


def critical_path(plan: StackPlan) -> CriticalPath:
    """Phases with start and duration, which overlap, the total (the longest lane) and its ratio
    to the largest transfer."""
    kind = source_kind(plan)
    phases = _phases(plan)
    lanes = bringup_catalog()["schedule"]["kubernetes" if kind == "kubernetes" else "host"]["lanes"]
    if "fanout" in phases:  # the peers fetch each file as soon as the seed has it: side by side
        lanes = [*lanes, ["fanout"]]
    placed: list[Phase] = []
    ends: list[float | None] = []
    for lane in lanes:  # side by side; within a lane one phase after another
        clock: float | None = 0.0
        for name in lane:
            p = phases[name]
            placed.append(Phase(**{**p.__dict__, "start_s": clock}))
            clock = None if clock is None or p.seconds is None else clock + p.seconds
        ends.append(clock)
    total = None if None in ends else max((e for e in ends if e is not None), default=0.0)
    transfers = [p for p in placed if p.size_gb is not None and p.seconds]
    unknown = [p.name for p in placed if p.seconds is None]
    largest = max(transfers, key=lambda p: p.seconds or 0.0, default=None)
    ratio = None
    if total is not None and largest is not None and largest.seconds:
        ratio = round(total / largest.seconds, 2)
    defaults = bringup_catalog()["source"][kind]
    hub = hub_asked(plan)
    return CriticalPath(
        node_source=kind,
        nodes=len(plan.nodes),
        phases=[
            PhaseView(
                name=p.name,
                size_gb=p.size_gb,
                basis=p.basis,
                gbps=p.gbps,
                seconds=p.seconds,
                start_s=p.start_s,
                end_s=p.end_s,
                overlaps=[q.name for q in placed if q is not p and _overlap(p, q)],
                source=p.source,
            )
            for p in placed
        ],
        total_s=total,
        lanes=[list(lane) for lane in lanes],
        largest_transfer=largest.name if largest else None,
        ratio_to_largest_transfer=ratio,
        unknown=unknown,
        weights_prestaged=plan.spec.weights.prestaged,
        defaults_source=defaults["source"],
        hub_gb=hub[0],
        hub_downloads=hub[1],
        hub_source=hub[2],
    )


def _overlap(p: Phase, q: Phase) -> bool:
    """Both run at some moment together (an unknown end counts as open-ended)."""
    if p.start_s is None or q.start_s is None or not (p.seconds != 0 and q.seconds != 0):
        return False
    p_end = p.end_s if p.end_s is not None else float("inf")
    q_end = q.end_s if q.end_s is not None else float("inf")
    return p.start_s < q_end and q.start_s < p_end
