"""The deployment facts seam: what the stack file says plus what bench.yml reads on the nodes.

From the stack (offline): the recipe selection (the badge comes from rendering it again), the
image reference, instance type, node count, the catalog's hourly price and the stack's
benchmark thresholds. From every node (`bench.yml --tags facts`, roles/node_facts): the GPU
driver version, the image id and registry digests, and package versions inside the image.
Facts are best effort: what could not be read is said in ``Deployment.notes``, and the
fingerprint carries it. A stack file that exists but is refused stops the benchmark, since
its thresholds would otherwise be silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flashfleet.bench.fingerprint import Deployment, RecipeSelection
from flashfleet.bringup.contract import node_zero
from flashfleet.bringup.errors import BringupInputError, NoInventory
from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.catalog import hardware_catalog
from flashfleet.planning import StackPlan
from flashfleet.stack import ExistingSource, StackError
from flashfleet.stack.files import DEFAULT_STACKS_DIR, stack_path

PLAYBOOK = "bench.yml"
FACTS_TASK = "Report | node facts"  # roles/node_facts: its set_fact carries node_facts_report


class StackRefused(Exception):
    """The stack file exists and is invalid (the message lists its problems)."""


def stack_deployment(stack: str, stacks_dir: Path = DEFAULT_STACKS_DIR) -> Deployment:
    """What the stack file says; ``Deployment(stack)`` with a note when there is no such file."""
    from flashfleet.planning import load_stack

    if not stack_path(stack, stacks_dir).is_file():
        return Deployment(stack=stack, notes=(f"no stack file for {stack}: recipe and price unknown",))
    try:
        b = load_stack(stack, stacks_dir)
    except StackError as err:
        raise StackRefused(str(err)) from None
    return from_bringup(b)


def from_bringup(plan: StackPlan) -> Deployment:
    spec = plan.spec
    src = spec.nodes.source
    addresses = None
    if isinstance(src, ExistingSource):  # the recipe was rendered for these (multi-node rendezvous)
        addresses = src.private_addresses()
    return Deployment(
        stack=plan.stack,
        recipe=RecipeSelection(
            spec.hardware,
            spec.strategy,
            spec.topology,
            {**spec.options, "nodes": spec.nodes.count},
            addresses=addresses,
        ),
        image=spec.image.ref(hardware_catalog()[spec.hardware]),
        instance_type=plan.instance.name if plan.instance else None,
        node_count=len(plan.gpu_nodes),
        # No price when a part of the whole is unknown (a router's node unpriced in the region).
        hourly_usd_per_node=plan.instance.price_usd_per_hour
        if plan.instance and plan.hourly_cost_usd is not None
        else None,
        router_hourly_usd=plan.router_instance.price_usd_per_hour if plan.router_instance else None,
        price_source=plan.price_source,
        price_date=plan.instance.price_date if plan.instance else None,
        region=plan.region,
        thresholds={name: t.model_dump(exclude_none=True) for name, t in spec.bench.thresholds.items()},
        lock_digest=plan.lock.digest if plan.lock else None,
        locked_weights={repo: e.commit for repo, e in plan.lock.weights.items()} if plan.lock else {},
    )


@dataclass(frozen=True)
class NodeFacts:
    """Facts per inventory host, and the problems met reading them."""

    by_host: Mapping[str, Mapping[str, Any]]
    problems: tuple[str, ...] = ()


def read_node_facts(
    stack: str, inventory: Mapping[str, Any], runs_root: Path, project: Project = DEFAULT_PROJECT
) -> NodeFacts:
    from flashfleet.bringup import handoff  # here: a bench refused before reading facts needs no Ansible

    try:
        result = handoff.run_recorded(
            PLAYBOOK, inventory, project=project, runs_root=runs_root, stack=stack, tags="facts"
        )
    except BringupInputError as err:
        return NodeFacts({}, (f"{PLAYBOOK} refused: {err}",))
    by_host: dict[str, Any] = {}
    for line in result.events_log.read_text().splitlines():
        event = json.loads(line)
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("task") == FACTS_TASK:
            by_host[str(data["host"])] = data["res"]["ansible_facts"]["node_facts_report"]
    problems = [f"{host}: {err}" for host, facts in by_host.items() for err in facts.get("errors") or []]
    missing = sorted(set(inventory["all"]["hosts"]) - set(by_host))
    if missing:
        problems.append(f"no facts from {', '.join(missing)} ({result.summary().splitlines()[0]})")
    return NodeFacts(by_host, tuple(problems))


def _versions(facts: Mapping[str, Any]) -> dict[str, str]:
    """One node's facts as the fingerprint's flat {name: version} (unknown ones left out)."""
    out: dict[str, str] = {}
    for key in ("nvidia_driver", "amdgpu_driver", "image_id"):
        if facts.get(key):
            out[key] = str(facts[key])
    for key, value in (facts.get("amd") or {}).items():  # amd-smi version: ROCm, amdgpu, ...
        out[f"amd_smi:{key}"] = str(value)
    for name, version in (facts.get("packages") or {}).items():
        if version:
            out[name] = str(version)
    return out


def with_node_facts(deployment: Deployment, inventory: Mapping[str, Any], facts: NodeFacts) -> Deployment:
    notes = [*deployment.notes, *facts.problems]
    node0 = facts.by_host.get(node_zero(dict(inventory)), {})
    for host, f in facts.by_host.items():  # prepare checked the lock; a node changed since says so
        for repo, commit in (f.get("weights") or {}).items():
            pinned = deployment.locked_weights.get(repo)
            if pinned and commit != pinned:
                notes.append(f"{host} holds {repo} at {commit}, the lock pins {pinned}")
    digests = {str(h): f.get("image_id") for h, f in facts.by_host.items()}
    if len(set(digests.values())) > 1:
        notes.append(f"the nodes run different images: {digests}")
    return replace(
        deployment,
        image_digest=node0.get("image_id") or deployment.image_digest,
        image_repo_digests=tuple(node0.get("image_repo_digests") or ()),
        node_versions={host: _versions(f) for host, f in facts.by_host.items()},
        node_weights={
            host: dict(f.get("weights") or {}) for host, f in facts.by_host.items() if f.get("weights")
        },
        notes=tuple(notes),
    )


def deployment_facts(
    stack: str,
    *,
    inventory_of: Callable[[str], dict[str, Any]],
    runs_root: Path,
    stacks_dir: Path = DEFAULT_STACKS_DIR,
    project: Project = DEFAULT_PROJECT,
) -> Deployment:
    """The whole seam: stack facts, then node facts where the stack's inventory is known."""
    deployment = stack_deployment(stack, stacks_dir)
    try:
        inventory = inventory_of(stack)
    except NoInventory as err:
        return replace(deployment, notes=(*deployment.notes, f"node facts not read: {err}"))
    return with_node_facts(deployment, inventory, read_node_facts(stack, inventory, runs_root, project))
