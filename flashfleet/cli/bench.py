"""`flashfleet bench STACK`: run a workload profile against the stack's endpoint, store and report it.

Exit status: 0 ok, 1 a gate threshold failed, 2 bad input, 3 the benchmark failed,
4 the teardown failed (the stack may still be billing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flashfleet.cli.common import UsageError, add_stack
from flashfleet.table import aligned

if TYPE_CHECKING:
    from flashfleet.bench.cluster_protocol import Cluster
    from flashfleet.bench.session import BenchRequest


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmark a stack's endpoint with a workload profile")
    add_stack(
        p, "stack name, or the path of its file (results go to RESULTS/STACK/TIMESTAMP/)", required=False
    )
    p.add_argument("--profile", default="chat-1k1k", help="workload profile (default: %(default)s)")
    p.add_argument(
        "--profiles-file", type=Path, default=None, help="profiles TOML instead of the packaged one"
    )
    p.add_argument("--list-profiles", action="store_true", help="list the profiles and exit")
    p.add_argument("--endpoint", default=None, metavar="URL", help="serving base URL, e.g. http://HOST:8000")
    p.add_argument("--destroy", action="store_true", help="tear the stack down afterwards, even on failure")
    p.add_argument(
        "--results", type=Path, default=Path("results"), help="results root (default: %(default)s)"
    )
    p.add_argument("--local", action="store_true", help="run bench_serving on this machine, not on a node")
    p.add_argument("--python", default="python3", help="interpreter that has sglang (default: %(default)s)")
    p.add_argument(
        "--module", default="sglang.benchmark.serving",
        choices=("sglang.benchmark.serving", "sglang.bench_serving"),
        help="benchmark module (default: %(default)s; the other is its deprecated alias)",
    )  # fmt: skip
    p.add_argument("--concurrency", default=None, metavar="N,N,...", help="override the profile's levels")
    p.add_argument("--num-prompts", type=int, default=None, help="override the requests per level")
    p.add_argument(
        "--threshold", action="append", default=[], metavar="NAME=VALUE",
        help="set a gate threshold (repeatable), e.g. max_p99_ttft_ms=2000",
    )  # fmt: skip
    p.add_argument("--hardware", help="recipe of the deployment, for the fingerprint")
    p.add_argument("--strategy", help="recipe strategy, for the fingerprint")
    p.add_argument("--topology", default="unified", help="recipe topology (default: %(default)s)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="NAME=VALUE",
                   help="recipe option override, as given to `flashfleet render`")  # fmt: skip
    p.add_argument("--instance-type", default=None, help="instance type, for the fingerprint")
    p.add_argument("--node-count", type=int, default=None, help="nodes serving the endpoint")
    p.add_argument(
        "--hourly-price", type=float, default=None, metavar="USD",
        help="your own price of one instance-hour (overrides the catalog's and the stack's)",
    )  # fmt: skip
    p.add_argument(
        "--gpus", type=int, default=None, help="GPUs serving the endpoint (default: from the recipe)"
    )
    p.add_argument(
        "--server", dest="servers", action="append", default=None, metavar="ROLE=URL[@DP]",
        help="a server behind the endpoint to check for readiness (and, for prefill/decode, its share); "
        "repeatable; default: from the recipe at the nodes' addresses",
    )  # fmt: skip
    p.add_argument(
        "--ready-timeout", type=float, default=600.0, metavar="S",
        help="seconds every server and rank may take to become ready (default: %(default)s)",
    )  # fmt: skip
    p.set_defaults(func=run)


def _levels(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--concurrency must be integers separated by commas, not {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError("--concurrency values must be at least 1")
    return values


def _thresholds(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise UsageError(f"--threshold wants NAME=NUMBER, not {item!r}")
    return out


def _list_profiles(path: Path | None) -> int:
    from flashfleet.bench.profiles import load_profiles

    rows = [
        [name, prof.backend, prof.dataset, "c=" + ",".join(map(str, prof.concurrency)), prof.description]
        for name, prof in load_profiles(path).items()
    ]
    print("\n".join(aligned(rows)))
    return 0


def run(args: argparse.Namespace) -> int:
    from flashfleet.bench.fingerprint import RecipeSelection
    from flashfleet.bench.profiles import ProfileError, get_profile
    from flashfleet.bench.session import BenchRequest

    try:
        if args.list_profiles:
            return _list_profiles(args.profiles_file)
        if not args.stack:
            raise UsageError("which stack? flashfleet bench STACK")
        from flashfleet.cli.common import stack_arg

        # the stack file where `plan` and `status` find it too: a project's own ./stacks first
        args.stack, stacks_dir = stack_arg(args.stack, None)
        from flashfleet.bringup.secret_env import check_env_secrets

        check_env_secrets()  # a key the runs cannot hide is refused before any request or node
        profile = get_profile(args.profile, args.profiles_file)
        profile = profile.with_overrides(
            concurrency=_levels(args.concurrency),
            num_prompts=args.num_prompts,
            gate=profile.gate.merged(_thresholds(args.threshold)) if args.threshold else None,
        )
    except (ProfileError, ValueError, OSError) as err:
        raise UsageError(str(err)) from None

    recipe = None
    if args.hardware or args.strategy:
        if not (args.hardware and args.strategy):
            raise UsageError("--hardware and --strategy go together")
        from flashfleet.recipes import render
        from flashfleet.recipes.options import parse_assignments

        overrides = parse_assignments(args.assignments)
        render(args.hardware, args.strategy, args.topology, overrides)  # a refused recipe: exit 2 now
        recipe = RecipeSelection(args.hardware, args.strategy, args.topology, overrides)
    if args.hourly_price is not None and args.hourly_price <= 0:
        raise UsageError("--hourly-price must be > 0")
    if args.gpus is not None and args.gpus < 1:
        raise UsageError("--gpus must be at least 1")
    servers = None
    if args.servers is not None:
        from flashfleet.bench.servers import parse_server

        try:
            servers = tuple(parse_server(text) for text in args.servers)
        except ValueError as err:
            raise UsageError(str(err)) from None
    if args.endpoint is not None:
        _not_a_placeholder(args.endpoint)
    if args.local:  # known in a second here, else found by the levels after the readiness wait
        _local_preflight(args.python, args.module, args.endpoint)
    from flashfleet.cli.common import writable_dir

    # after every input check (a refusal creates nothing), before the benchmark runs: its results must land
    writable_dir(args.results, "--results")
    facts: dict[str, Any] = {
        "instance_type": args.instance_type,
        "node_count": args.node_count,
        "hourly_usd_per_node": args.hourly_price,
        "price_source": "--hourly-price (your own price)" if args.hourly_price is not None else None,
        "gpus": args.gpus,
    }
    request = BenchRequest(
        stack=args.stack,
        profile=profile,
        results_root=args.results,
        endpoint=args.endpoint,
        destroy=args.destroy,
        local=args.local,
        python=args.python,
        module=args.module,
        recipe=recipe,
        facts=facts,
        servers=servers,
        ready_timeout_s=args.ready_timeout,
    )
    return execute(request, stack_cluster(stacks_dir))


def _not_a_placeholder(endpoint: str) -> None:
    """An endpoint at a documentation address (the README's examples) is refused, never dialled."""
    from urllib.parse import urlsplit

    from flashfleet.stack.placeholder_addresses import placeholder_network, placeholder_text

    host = urlsplit(endpoint).hostname or ""
    if net := placeholder_network(host):
        raise UsageError(f"--endpoint {endpoint}: {placeholder_text(host, net)}")


def _local_preflight(python: str, module: str, endpoint: str | None) -> None:
    """The load generator here, then a server at the endpoint given: before any folder is made."""
    from flashfleet.bench.argv import check_base_url
    from flashfleet.bench.errors import BenchSetupError
    from flashfleet.bench.local_checks import check_client, check_endpoint_answers
    from flashfleet.bench.runner import LocalRunner

    try:
        check_client(LocalRunner(), python, module)
        if endpoint is not None:
            check_endpoint_answers(check_base_url(endpoint))
    except (BenchSetupError, ValueError) as err:
        raise UsageError(str(err)) from None


def stack_cluster(stacks_dir: Path) -> Cluster:
    """The stack's nodes, through the bring-up (imported on this path only: it pulls the bring-up in)."""
    from flashfleet.cli.shared.stack_cluster import StackCluster

    return StackCluster(stacks_dir=stacks_dir)


def execute(request: BenchRequest, cluster: Cluster) -> int:
    """Run the request and print the outcome; the exit status follows session.BenchOutcome."""
    from flashfleet.bench.errors import BenchSetupError
    from flashfleet.bench.session import EXIT_TEARDOWN_FAILED, TeardownFailed, bench

    def log(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        outcome = bench(request, cluster, log)
    except BenchSetupError as err:
        raise UsageError(str(err)) from None
    except TeardownFailed as err:
        print(f"flashfleet bench: {err}; the stack may still be running", file=sys.stderr)
        return EXIT_TEARDOWN_FAILED
    for problem in outcome.run.problems:
        print(f"flashfleet bench: {problem}", file=sys.stderr)
    for failure in outcome.run.failures:
        print(f"flashfleet bench: concurrency {failure.concurrency} failed: {failure.error}", file=sys.stderr)
        for line in failure.log_tail:
            print(f"    {line}", file=sys.stderr)
    if not outcome.run.ok:
        print("flashfleet bench: NOT a valid result (report.md says why; raw logs kept)", file=sys.stderr)
    if outcome.gate is not None:
        for check in outcome.gate.checks:
            print(check.line())
        for level in outcome.gate.missing_levels:
            print(f"FAIL gate names concurrency {level}, which this run does not have")
    for lv in outcome.run.summaries:
        ttft, tpot = lv.ttft_ms.p99, lv.tpot_ms.p99
        print(
            f"c={lv.concurrency}: {lv.output_throughput:.1f} output tok/s, "
            f"TTFT p99 {'-' if ttft is None else f'{ttft:.1f}'} ms, "
            f"TPOT p99 {'-' if tpot is None else f'{tpot:.2f}'} ms"
        )
    print(f"results: {outcome.run_dir}")
    return outcome.exit_code
