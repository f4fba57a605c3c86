"""Exactly what was measured: the recipe, the image, the nodes' software, the hardware.

``Deployment`` is the input the bring-up fills from the stack and from the nodes (image digest,
driver and package versions it read there). The recipe's commands are rendered again here with
``flashfleet.recipes.render``, so the fingerprint carries the argv the recipe engine produces for
that selection, with the same badge. ``recipe_fingerprint`` runs before the benchmark, so a selection the
engine rejects stops the run before it starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flashfleet import __version__


@dataclass(frozen=True)
class RecipeSelection:
    hardware: str
    strategy: str
    topology: str = "unified"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    addresses: Sequence[str] | None = None  # node addresses, as the recipe was rendered for the nodes


@dataclass(frozen=True)
class Deployment:
    """Facts about the deployed stack; every field but ``stack`` may be unknown."""

    stack: str
    recipe: RecipeSelection | None = None
    image: str | None = None  # reference as deployed, e.g. a tag
    image_digest: str | None = None  # sha256:... of what the nodes run
    instance_type: str | None = None
    node_count: int = 1
    hourly_usd_per_node: float | None = None  # from the instance catalog, the stack, or a block
    router_hourly_usd: float | None = None  # a cluster router's CPU node of its own (AWS), if any
    price_source: str | None = None  # where hourly_usd_per_node comes from (no source: no price)
    price_date: str | None = None
    gpus: int | None = None  # GPUs serving the endpoint; None: counted from the recipe
    # node name -> {"nvidia_driver": "...", "cuda": "...", "sglang": "...", ...}
    node_versions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    region: str | None = None
    image_repo_digests: Sequence[str] = ()  # registry digests of the image (none for a local build)
    # profile -> gate threshold name -> limit, from the stack's bench.thresholds
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    notes: Sequence[str] = ()  # facts that could not be read, and why
    lock_digest: str | None = None  # the stack's lock (flashfleet.stack.lock), None without one
    locked_weights: Mapping[str, str] = field(default_factory=dict)  # repository -> commit, as locked
    # node name -> {repository: commit} the node holds (model_weights' markers): what was served
    node_weights: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def recipe_fingerprint(selection: RecipeSelection) -> dict[str, Any]:
    from flashfleet.recipes import render

    recipe = render(
        selection.hardware,
        selection.strategy,
        selection.topology,
        selection.overrides,
        addresses=selection.addresses,
    )
    return {
        "hardware": recipe.hardware,
        "strategy": recipe.strategy,
        "topology": recipe.topology,
        "overrides": dict(selection.overrides),
        "badge": recipe.badge,
        "badge_source": recipe.badge_source,
        "model": recipe.model,
        "processes": [p.to_dict() for p in recipe.start_order()],
    }


def recipe_gpus(recipe: dict[str, Any] | None) -> int | None:
    """GPUs the recipe's processes hold: tp x pp x cp of each engine, summed over engines."""
    if not recipe:
        return None
    return sum(len(p.get("gpus", [])) for p in recipe.get("processes", [])) or None


def weights_record(deployment: Deployment) -> dict[str, Any]:
    """Which bytes of each repository were served: the lock's commits, and what the nodes hold."""
    return {
        "lock_digest": deployment.lock_digest,
        "locked": dict(deployment.locked_weights),
        "on_nodes": {node: dict(w) for node, w in deployment.node_weights.items()},
    }


def served_commits(fingerprint: Mapping[str, Any]) -> dict[str, str]:
    """Repository -> the commit a run's servers loaded: node 0's (the first node that holds it),
    else the lock's; a run recorded before the weights were, none."""
    weights = fingerprint.get("weights") or {}
    out = dict(weights.get("locked") or {})
    for held in reversed(list((weights.get("on_nodes") or {}).values())):
        out.update(held)
    return out


def build_differences(fingerprints: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per repository or image reference that runs (label -> fingerprint) share but
    served as different bytes: a commit of the same repository, a digest of the same image tag.
    A different checkpoint or image is a different configuration, shown in the table instead."""
    lines = []
    served = {label: served_commits(fp) for label, fp in fingerprints.items()}
    for repo in sorted({r for commits in served.values() for r in commits}):
        seen = {label: c[repo] for label, c in served.items() if repo in c}
        unrecorded = [label for label, fp in fingerprints.items() if label not in seen and _loads(fp, repo)]
        if len(set(seen.values())) > 1 or (seen and unrecorded):
            parts = [f"{c} ({label})" for label, c in seen.items()] + [
                f"not recorded ({u})" for u in unrecorded
            ]
            lines.append(f"weights {repo}: {', '.join(parts)}")
    images: dict[str, dict[str, str]] = {}
    for label, fp in fingerprints.items():
        if fp.get("image") and fp.get("image_digest"):
            images.setdefault(str(fp["image"]), {})[label] = str(fp["image_digest"])
    for ref, digests in sorted(images.items()):
        if len(set(digests.values())) > 1:
            lines.append(f"image {ref}: " + ", ".join(f"{d} ({label})" for label, d in digests.items()))
    return lines


def _loads(fingerprint: Mapping[str, Any], repo: str) -> bool:
    """The run's recipe loads the repository (its model, or a draft among its argv)."""
    recipe = fingerprint.get("recipe") or {}
    argv = [w for p in recipe.get("processes", []) for w in p.get("argv", [])]
    return recipe.get("model") == repo or repo in argv


def make_fingerprint(
    deployment: Deployment,
    *,
    recipe: dict[str, Any] | None,
    profile: str,
    bench_argv: Sequence[Sequence[str]],
    endpoint: str,
    method: dict[str, Any] | None = None,
    local: bool = False,
) -> dict[str, Any]:
    return {
        "stack": deployment.stack,
        "recipe": recipe,
        "image": deployment.image,
        "image_digest": deployment.image_digest,
        "image_repo_digests": list(deployment.image_repo_digests),
        "instance_type": deployment.instance_type,
        "node_count": deployment.node_count,
        "region": deployment.region,
        "hourly_usd_per_node": deployment.hourly_usd_per_node,
        "router_hourly_usd": deployment.router_hourly_usd,
        "price_source": deployment.price_source,
        "price_date": deployment.price_date,
        "gpus": deployment.gpus or recipe_gpus(recipe),
        "node_versions": {node: dict(v) for node, v in deployment.node_versions.items()},
        "weights": weights_record(deployment),
        "benchmark": {
            "profile": profile,
            "endpoint": endpoint,
            "argv": [list(a) for a in bench_argv],
        },
        "method": method,
        # The load generator: the module and its sglang version (in `method`), and where it ran.
        "load_generator": {
            "module": (method or {}).get("client_module"),
            "sglang": (method or {}).get("client_version"),
            "ran_in": "this machine (--local)" if local else "the serving image on node 0",
            "image": None if local else deployment.image,
            "image_digest": None if local else deployment.image_digest,
        },
        "notes": list(deployment.notes),
        "flashfleet_version": __version__,
    }
