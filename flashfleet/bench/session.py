"""`flashfleet bench` as one guarded step: measure, store, report, and tear down if asked.

With ``destroy`` the teardown runs in a ``finally``: after a failed benchmark, a failed endpoint
lookup, an exception in the driver or a Ctrl-C, the stack still goes. What the session needs of
the stack comes in as its ``Cluster`` (flashfleet.bench.cluster_protocol).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flashfleet.bench.argv import check_base_url
from flashfleet.bench.cluster_protocol import Cluster
from flashfleet.bench.cost import level_cost_per_mtok, run_cost
from flashfleet.bench.driver import BenchRun, run_profile
from flashfleet.bench.errors import BenchSetupError
from flashfleet.bench.evidence import evidence_of, write_evidence
from flashfleet.bench.fingerprint import (
    Deployment,
    RecipeSelection,
    make_fingerprint,
    recipe_fingerprint,
    recipe_gpus,
)
from flashfleet.bench.gate import GateResult, evaluate
from flashfleet.bench.level_counters import LevelReads, cold_warning
from flashfleet.bench.method import method_of, probe_client_version
from flashfleet.bench.profiles import BENCH_MODULES, CACHE_SHARED, Profile
from flashfleet.bench.report import write_report
from flashfleet.bench.runner import LocalRunner, Runner
from flashfleet.bench.seeds import new_run_id
from flashfleet.bench.servers import (
    SHARE_COUNTERS,
    FetchMany,
    PostMany,
    Server,
    fetch_here,
    fetch_through,
    post_here,
    post_through,
    read_counters,
    servers_from_recipe,
    share_problems,
    wait_ready,
)
from flashfleet.bench.store import load_run, write_run
from flashfleet.stack.thresholds import Thresholds

EXIT_OK, EXIT_GATE_FAILED, EXIT_BENCH_FAILED, EXIT_TEARDOWN_FAILED = 0, 1, 3, 4


class TeardownFailed(Exception):
    """The benchmark is done (and stored) but the stack may still exist and bill."""


@dataclass(frozen=True)
class BenchRequest:
    stack: str
    profile: Profile
    results_root: Path = Path("results")
    endpoint: str | None = None  # None: ask the cluster (the stack's outputs)
    destroy: bool = False
    local: bool = False  # run bench_serving here, not on one of the cluster's nodes
    python: str = "python3"
    module: str = BENCH_MODULES[0]
    recipe: RecipeSelection | None = None  # overrides what the bring-up reports
    facts: Mapping[str, Any] | None = None  # Deployment fields given on the command line
    servers: tuple[Server, ...] | None = None  # every server behind the endpoint (None: from the recipe)
    ready_timeout_s: float = 600.0  # how long every server and rank may take to become ready
    run_id: str | None = None  # what the run's seeds derive from (None: a fresh one)


@dataclass(frozen=True)
class BenchOutcome:
    run: BenchRun
    run_dir: Path
    gate: GateResult | None

    @property
    def exit_code(self) -> int:
        if not self.run.ok:
            return EXIT_BENCH_FAILED
        if self.gate is not None and not self.gate.passed:
            return EXIT_GATE_FAILED
        return EXIT_OK


def bench(request: BenchRequest, cluster: Cluster, log: Callable[[str], None] = print) -> BenchOutcome:
    failure: BaseException | None = None
    try:
        return _measure(request, cluster, log)
    except BaseException as err:
        failure = err
        raise
    finally:
        if request.destroy:
            log(f"bench: tearing down stack {request.stack}")
            try:
                cluster.teardown(request.stack)
            except Exception as td_err:
                if failure is None:
                    raise TeardownFailed(f"teardown of stack {request.stack} failed: {td_err}") from td_err
                failure.add_note(f"teardown of stack {request.stack} also failed: {td_err}")


def _deployment(request: BenchRequest, cluster: Cluster) -> Deployment:
    deployment = cluster.deployment(request.stack)
    if request.recipe is not None:
        deployment = replace(deployment, recipe=request.recipe)
    if request.facts:
        deployment = replace(deployment, **{k: v for k, v in request.facts.items() if v is not None})
    return deployment


def gate_for(profile: Profile, deployment: Deployment) -> Thresholds:
    """The stack's thresholds for this profile, overridden name by name by the profile's own gate
    (the profiles file and `--threshold`: what the command line asked for wins)."""
    from_stack = deployment.thresholds.get(profile.name, {})
    if not from_stack:
        return profile.gate
    try:
        return Thresholds.from_mapping(from_stack).merged(profile.gate.model_dump(exclude_none=True))
    except ValueError as err:
        raise BenchSetupError(f"stack {deployment.stack}: bench.thresholds.{profile.name}: {err}") from None


def _measure(request: BenchRequest, cluster: Cluster, log: Callable[[str], None]) -> BenchOutcome:
    deployment = _deployment(request, cluster)
    recipe = recipe_fingerprint(deployment.recipe) if deployment.recipe else None  # fail before running
    thresholds = gate_for(request.profile, deployment)
    endpoint = request.endpoint
    if endpoint is None:
        endpoint = cluster.endpoint(request.stack)
    try:
        endpoint = check_base_url(endpoint)
    except ValueError as err:
        raise BenchSetupError(str(err)) from None
    local = request.local
    runner: Runner = LocalRunner() if local else cluster.runner(request.stack)
    profile = request.profile.for_hardware(deployment.recipe.hardware if deployment.recipe else None)
    servers = _servers(request, recipe, deployment, endpoint)

    client_version, note = probe_client_version(runner, request.python)
    if note:
        log(f"bench: {note}")
        deployment = replace(deployment, notes=(*deployment.notes, note))
    run_id = request.run_id or new_run_id()
    request = replace(request, run_id=run_id)
    method = method_of(profile, module=request.module, client_version=client_version, run_id=run_id)

    # Servers are asked from where the benchmark runs (their ports need not be open to here).
    fetch = fetch_here if local else fetch_through(runner, request.python)
    post = post_here if local else post_through(runner, request.python)
    run, worker_shares = _guarded_run(
        request, profile=profile, endpoint=endpoint, runner=runner, servers=servers, log=log, fetch=fetch,
        post=post,
    )  # fmt: skip

    gpus = deployment.gpus or recipe_gpus(recipe)
    cost = run_cost(
        deployment.hourly_usd_per_node, deployment.node_count, run.wall_s, run.summaries,
        gpus=gpus, source=deployment.price_source, date=deployment.price_date,
        router_hourly_usd=deployment.router_hourly_usd or 0.0,
    )  # fmt: skip
    level_costs = {
        lv.concurrency: level_cost_per_mtok(cost.hourly_usd, lv) if cost else None for lv in run.summaries
    }
    gate = None if thresholds.is_empty() else evaluate(thresholds, run.summaries, level_costs)
    fingerprint = make_fingerprint(
        deployment,
        recipe=recipe,
        profile=request.profile.name,
        bench_argv=[lv.argv for lv in run.levels],
        endpoint=run.endpoint,
        method=method,
        local=local,
    )
    run_dir = write_run(
        request.results_root, request.stack, run, fingerprint=fingerprint, cost=cost, gate=gate,
        gpus=gpus, servers=servers, worker_shares=worker_shares,
    )  # fmt: skip
    stored = load_run(run_dir)
    write_report(stored)
    # the stack's own badge: only a valid run that served tokens and passed its gate earns one
    if (evidence := evidence_of(stored, gate, thresholds)) is not None:
        write_evidence(run_dir, evidence)
    return BenchOutcome(run, run_dir, gate)


def _servers(
    request: BenchRequest,
    recipe: dict[str, Any] | None,
    deployment: Deployment,
    endpoint: str,
) -> tuple[Server, ...]:
    """Every server to check: as given, else from the recipe at the nodes' addresses (the
    endpoint's host is node 0's when the addresses are not known)."""
    if request.servers is not None:
        return request.servers
    if recipe is None:
        return ()
    selection = deployment.recipe
    addresses = list(selection.addresses) if selection and selection.addresses else []
    host = urlsplit(endpoint).hostname or "127.0.0.1"
    if request.endpoint is not None and addresses and host not in addresses:
        # The endpoint given is not on the stack's nodes (a tunnel, another copy of the stack, or
        # a stack file still at its example addresses): ask the server that was named.
        return (Server("server", endpoint),)
    return tuple(servers_from_recipe(recipe, addresses or [host]))


def _guarded_run(
    request: BenchRequest,
    *,
    profile: Profile,
    endpoint: str,
    runner: Runner,
    servers: tuple[Server, ...],
    log: Callable[[str], None],
    fetch: FetchMany,
    post: PostMany,
) -> tuple[BenchRun, dict[str, Any]]:
    """The levels, after every server and rank is ready and serving; each PD side's and replica's
    share checked."""
    ready_wait_s = None
    if servers:
        log(
            f"bench: waiting for {len(servers)} server(s), their data-parallel ranks and a generation of each"
        )
        t0 = time.monotonic()
        waiting = wait_ready(
            servers, timeout_s=request.ready_timeout_s, fetch=fetch, generate=post, endpoint=endpoint
        )
        ready_wait_s = round(time.monotonic() - t0, 1)
        if not waiting:
            log(f"bench: every server answered a generation after {ready_wait_s:.1f} s")
        if waiting:
            problems = tuple(f"not ready after {request.ready_timeout_s:.0f} s: {why}" for why in waiting)
            for line in problems:
                log(f"bench: {line}")
            empty = run_profile(replace(profile, concurrency=()), endpoint, runner, python=request.python,
                                module=request.module, run_id=request.run_id)  # fmt: skip
            return replace(empty, problems=problems, ready_wait_s=ready_wait_s), {}
    workers = [s for s in servers if s.share_metric]
    before = read_counters(workers, SHARE_COUNTERS, fetch) if workers else {}
    reads = LevelReads(servers, fetch)
    run = run_profile(
        profile, endpoint, runner, python=request.python, module=request.module, log=log,
        run_id=request.run_id, between=reads,
    )  # fmt: skip
    counters = reads.per_level()
    warnings = (
        [] if profile.cache == CACHE_SHARED else [w for c, d in counters.items() if (w := cold_warning(c, d))]
    )
    for line in warnings:
        log(f"bench: warning: {line}")
    run = replace(run, ready_wait_s=ready_wait_s, server_counters=counters, warnings=tuple(warnings))
    if not workers:
        return run, {}
    share, served = share_problems(workers, before, read_counters(workers, SHARE_COUNTERS, fetch))
    for line in share:
        log(f"bench: {line}")
    return replace(run, problems=(*run.problems, *share)), served
