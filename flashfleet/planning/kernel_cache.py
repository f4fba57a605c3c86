"""Where a bring-up's kernel caches come from: built on the node, or found warm.

SGLang's kernels (FlashInfer, DeepGEMM, Triton, TVM FFI, TileLang, torch, CUDA's PTX cache) are
compiled and autotuned at first boot. With caches.jit they land on the node's cache volume in one
folder per image and GPU model (flashfleet.launch.kernel_cache_key); the libraries key each entry
by the kernel's own configuration, so a cache is warm for a server whose kernel words
(flashfleet.launch.kernel_args) were run on it before, under the same image and GPU.

Decided here, once, for `plan`: the key's parts as the stack has them, whether the first and
second bring-up start warm on every node, through which channel (the kept cache volume, the EBS
snapshot of the weights volume, a peer's copy), and what stays unknown.
"""

from __future__ import annotations

from typing import Literal

from flashfleet.catalog import hardware_catalog
from flashfleet.launch import image_identity, kernel_args
from flashfleet.planning.critical_path import source_kind
from flashfleet.planning.plan_model import KernelCacheChannel, KernelCaches
from flashfleet.planning.resolve import StackPlan
from flashfleet.planning.stack_recipe import cache_volume_is_one_nodes
from flashfleet.stack.kubernetes_source import HostPathCache, KubernetesSource

Warmth = Literal["warm", "cold", "unknown"]

# Not built: a node without the key's folder does not yet fetch it from a peer that has it.
SHARED_VOLUME = (
    "built again: the cache volume is a ReadWriteMany PVC every server pod shares, so the compile "
    "caches stay in the containers"
)
PEER_FANOUT = (
    "not yet: a node without the folder builds its own (the weights' fan-out serves the checkpoint's "
    "locked files only, which a lock's hashes check; a kernel cache has no such hash)"
)


def _image(plan: StackPlan) -> tuple[str, bool]:
    """The image the kernels are compiled by, and whether it is pinned to a digest."""
    hw = hardware_catalog()[plan.spec.hardware]
    image = plan.spec.image
    tagged = image.tagged_ref(hw)
    if image.digest is None and plan.lock is not None and tagged in plan.lock.images:
        image = image.model_copy(update={"digest": plan.lock.images[tagged].digest})
    return image_identity(image, hw), image.digest is not None


def kept_volume(plan: StackPlan, kind: str, keep: bool) -> tuple[bool, str]:
    """Whether the second bring-up finds the first one's cache volume on its nodes, and why."""
    if kind == "aws":
        return False, "a new instance and volume"
    if kind == "existing":
        if keep:
            return True, "the cache volume is kept on the node (teardown.keepCaches: true)"
        return False, "teardown.keepCaches: false deletes the cache volume at `down`"
    src = plan.spec.nodes.source
    if isinstance(src, KubernetesSource) and isinstance(src.model_cache, HostPathCache):
        return True, "the hostPath cache stays on the node"
    if keep:
        return True, "`down` keeps the stack's cache claim (teardown.keepCaches: true)"
    return False, "teardown.keepCaches: false: `down` deletes the stack's cache claim"


def second_bringup(
    plan: StackPlan, kind: str, *, jit_cache: bool, keep: bool, snapshot: bool
) -> tuple[Warmth, str]:
    """Whether the second bring-up's servers find their kernels built on every node, and why; the
    settings are parameters so that `plan` can show each lever flipped."""
    if not jit_cache:
        return "cold", "built again: caches.jit is false, so the compile caches live in the container"
    if not cache_volume_is_one_nodes(plan.spec):
        return "cold", SHARED_VOLUME
    if snapshot:
        return "warm", (
            "every GPU node restores node 0's volume, kernel folder included, from the snapshot "
            "(caches.weightsSnapshot)"
        )
    kept, why = kept_volume(plan, kind, keep)
    if kept:
        return "warm", f"the compile caches are on the cache volume (caches.jit: true) and {why}"
    return "cold", f"built again: the compile caches are on the cache volume, but {why}"


def _channels(plan: StackPlan, kind: str) -> list[KernelCacheChannel]:
    kept, why = kept_volume(plan, kind, plan.spec.keeps_caches)
    snapshot = plan.weights_snapshot is not None
    if snapshot:
        snap = "node 0's weights volume, kernel folder included, restored into every GPU node"
    else:
        snap = "caches.weightsSnapshot is off" if kind == "aws" else "AWS only"
    return [
        KernelCacheChannel(name="kept cache volume", applies=kept, detail=why),
        KernelCacheChannel(name="weights snapshot", applies=snapshot, detail=snap),
        KernelCacheChannel(name="peer fan-out", applies=False, detail=PEER_FANOUT),
    ]


def kernel_caches(plan: StackPlan) -> KernelCaches:
    kind = source_kind(plan)
    image, pinned = _image(plan)
    servers = [p for p in plan.recipe.processes if p.role != "router"]
    sets = {kernel_args(p.argv) for p in servers}
    second, why = second_bringup(
        plan,
        kind,
        jit_cache=plan.spec.caches.jit,
        keep=plan.spec.keeps_caches,
        snapshot=plan.weights_snapshot is not None,
    )
    unknown = [
        "how much of the JIT phase a warm cache saves beyond the catalog's figure (FlashInfer's "
        "autotune alone is published)"
    ]
    if not pinned:
        unknown.append(
            "whether the image tag names the same digest at the next bring-up (no lock): another "
            "digest is another folder, built again"
        )
    return KernelCaches(
        image=image,
        image_pinned=pinned,
        gpu=plan.spec.hardware,
        kernel_word_sets=len(sets),
        nodes=len(plan.gpu_nodes),
        first="cold",
        first_source=(
            f"every GPU node builds its own, side by side ({len(plan.gpu_nodes)} node(s)); a peer's "
            "copy would arrive no sooner than the node's own build"
        ),
        second=second,
        second_source=why,
        channels=_channels(plan, kind),
        unknown=unknown,
    )
