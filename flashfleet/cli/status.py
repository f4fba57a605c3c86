"""`flashfleet status STACK`: the stack's outputs (secrets masked), its last Pulumi operation
and the latest bring-up runs recorded on this machine; whether its endpoint serves, for every kind
of stack: a cluster's router with every instance, else each API server's own /health, else (a
Kubernetes stack) its serving workloads' readiness read from the API server
(flashfleet.k8s.readiness), or its `endpoint` output's when the cluster cannot be read
(degraded names what is down; exit 1 unless serving, or not probed because the address resolves
inside the cluster only). A stack of the project never
brought up answers `state: not deployed` with exit 0, as `sky status` and `dstack ps` answer
with an empty table; an unknown stack is bad input (exit 2).

Without the Pulumi CLI (or when Pulumi cannot select the stack) it still shows the runs recorded
here, which is all an existing-hosts stack worked through `flashfleet configure` has; with
neither it exits 2 with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flashfleet.cli.common import UsageError, add_evidence_results, add_format, add_stack, print_json

if TYPE_CHECKING:
    from flashfleet.planning import StackPlan


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="outputs, last operation and latest bring-up runs of a stack")
    add_stack(p, "stack name, or the path of its file (Pulumi.<stack>.yaml)")
    p.add_argument("--runs-dir", type=Path, default=None, metavar="DIR", help="where run directories are")
    p.add_argument(
        "--inventory", type=Path, default=None, metavar="FILE",
        help="the stack's inventory (default: its outputs, or its latest configure run here)",
    )  # fmt: skip
    add_evidence_results(p)
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def stack_plan(stack: str, stacks_dir: Path | None = None) -> StackPlan | str:
    """The stack as its file says now (in `stacks_dir`, else where a name is found), read once for
    the evidence line and a Kubernetes stack's readiness; or why it cannot be judged."""
    from flashfleet.cli.common import stack_arg
    from flashfleet.planning import load_stack
    from flashfleet.stack import StackError

    try:
        return load_stack(*stack_arg(stack, stacks_dir))
    except (StackError, UsageError) as err:
        return f"not judged: {str(err).splitlines()[0]}"


def evidence_line(plan: StackPlan | str, results: Path) -> str:
    """The stack's own badge from its latest evidence, judged against its stack file now."""
    from flashfleet.bench.evidence import badge_line

    return plan if isinstance(plan, str) else badge_line(plan, results)


def recorded_runs(runs_root: Path, stack: str, last: int = 5) -> list[dict[str, str]]:
    """The latest runs of `stack` under `runs_root`: directory name and the summary's first part."""
    out = []
    for summary in sorted(runs_root.joinpath(stack).glob("*/summary.txt"))[-last:]:
        try:
            first = summary.read_text(encoding="utf-8", errors="replace").splitlines()[0]
        except (OSError, IndexError):
            first = "no summary"
        out.append({"run": summary.parent.name, "summary": first.split(";")[0], "dir": str(summary.parent)})
    return out


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup.run_dirs import default_runs_root
    from flashfleet.cli.common import stack_arg
    from flashfleet.cli.shared import stackops

    # Pulumi's state and the runs recorded here go by the name; the file is read where it is
    args.stack, args.stacks_dir = stack_arg(args.stack, None)
    runs_root = args.runs_dir or default_runs_root()
    runs = recorded_runs(runs_root, args.stack)
    report: dict[str, Any] = {"stack": args.stack, "pulumi": "ok", "last_operation": None, "outputs": {}}
    report["deployed"] = True
    try:
        if not stackops.cli_available():  # said before Pulumi's SDK is loaded
            raise stackops.PulumiUnavailable(stackops.NO_CLI)
        outs = stackops.outputs(args.stack)
        report["last_operation"] = stackops.last_update(args.stack)
        report["outputs"] = {k: v.shown() for k, v in sorted(outs.items()) if k != "inventory"}
    except (stackops.PulumiUnavailable, stackops.PulumiError) as err:
        if not runs and args.inventory is None:
            # A stack of the project not brought up yet is an answer, not bad input.
            report["deployed"], report["not_deployed"] = (
                False,
                _never_deployed(args.stack, err, runs_root, args.stacks_dir),
            )
        report["pulumi"] = str(err)
    report["runs"] = runs
    if not report["deployed"]:
        return _not_deployed(args, report, runs_root)
    plan = stack_plan(args.stack, args.stacks_dir)
    report["evidence"] = evidence_line(plan, args.results)
    health = _endpoint_health(args, runs_root, plan, report["outputs"].get("endpoint"))
    report["endpoint"] = None if health is None else {"state": health.state, **health.model_dump(mode="json")}
    code = 0 if health is None or health.state in ("serving", "not probed") else 1
    if args.format == "json":
        print_json(report)
        return code
    print(f"stack: {args.stack}")
    if report["pulumi"] != "ok":
        print(f"pulumi: not read ({report['pulumi']})", file=sys.stderr)
    else:
        print(f"last operation: {report['last_operation'] or 'none'}")
        for key, value in report["outputs"].items():
            print(f"{key}: {value}")
    for r in runs:
        print(f"run {r['run']}: {r['summary']}")
    print(f"evidence: {report['evidence']}")
    if health is not None:
        print(health.line())
    return code


def _never_deployed(stack: str, err: Exception, runs_root: Path, folder: Path | None = None) -> str:
    """Why the stack counts as not deployed: the project has its file, no run of it is recorded
    here, and Pulumi has no stack of that name (or there is no Pulumi CLI to ask). Refuses an
    unknown stack, and any other Pulumi failure (a wrong passphrase, a backend out of reach)."""
    from flashfleet.cli.shared import stackops
    from flashfleet.stack.files import list_stacks, stack_path

    stacks = stackops.project_dir() / "stacks"
    if not (stack_path(stack, stacks).is_file() or (folder and stack_path(stack, folder).is_file())):
        from flashfleet.suggest import did_you_mean

        known = list_stacks(stacks)
        raise UsageError(
            f"stack {stack!r}: no such stack (known: {', '.join(known)}){did_you_mean(stack, known)}"
        )
    if isinstance(err, stackops.UnknownStack):
        return f"Pulumi has no stack {stack}, and no run of it is recorded under {runs_root}"
    if isinstance(err, stackops.PulumiUnavailable):
        return (
            f"no run of it is recorded under {runs_root}; without the Pulumi CLI a deployment "
            "made from elsewhere cannot be read"
        )
    raise UsageError(f"{err}; and no run of {stack} is recorded here")


def _not_deployed(args: argparse.Namespace, report: dict[str, Any], runs_root: Path) -> int:
    report["evidence"] = evidence_line(stack_plan(args.stack, args.stacks_dir), args.results)
    report["endpoint"] = None
    if args.format == "json":
        print_json(report)
        return 0
    print(f"stack: {args.stack}")
    print(f"pulumi: not read ({report['pulumi']})", file=sys.stderr)
    print(f"state: not deployed ({report['not_deployed']}); `flashfleet up {args.stack}` brings it up")
    print(f"evidence: {report['evidence']}")
    return 0


def _endpoint_health(
    args: argparse.Namespace, runs_root: Path, plan: StackPlan | str, endpoint: object = None
) -> Any:
    """The endpoint's health, for every kind of stack: a cluster's router and instances, else each
    API server of the inventory, else (Kubernetes: no inventory) the stack's `endpoint` output.
    None when there is nothing to ask."""
    from flashfleet.bringup.endpoint_health import endpoint_health, servers_health, url_health
    from flashfleet.bringup.errors import BringupInputError, NoInventory
    from flashfleet.cli.shared.cliargs import load_inventory
    from flashfleet.cli.shared.stack_inventory import stack_inventory

    inventory = None
    if args.inventory:
        try:
            inventory = load_inventory(args.inventory)
        except BringupInputError as err:
            raise UsageError(str(err)) from None
    else:
        with contextlib.suppress(NoInventory):
            inventory = stack_inventory(args.stack, runs_root)
    if inventory is not None:
        return endpoint_health(inventory) or servers_health(inventory)
    if not isinstance(plan, str) and (kube := _kubernetes_health(args, plan)) is not None:
        return kube
    return url_health(str(endpoint)) if isinstance(endpoint, str) and endpoint.startswith("http") else None


def _kubernetes_health(args: argparse.Namespace, stack: StackPlan) -> Any:
    """A Kubernetes stack: its serving workloads' readiness as the API server holds it (nothing
    answers HTTP from here), so a group the controller is healing is named degraded. None for
    another source, or with a warning when the cluster cannot be read (no access, no answer)."""
    from flashfleet.stack.kubernetes_source import KubernetesSource

    spec = stack.spec
    source = spec.nodes.source
    if not isinstance(source, KubernetesSource):
        return None
    from flashfleet.cli.shared.cluster_api import serving_objects
    from flashfleet.k8s import names, readiness
    from flashfleet.planning.stack_recipe import kubernetes_plan

    plan = kubernetes_plan(args.stack, spec)
    try:
        objects, pods = serving_objects(
            source.context, plan.namespace, f"{names.LABEL_INSTANCE}={args.stack}"
        )
    except Exception as err:  # the kubernetes client raises many kinds; none is a verdict
        context = source.context or "the current context"
        print(
            f"status: the workloads' readiness not read ({context}): {str(err).splitlines()[0]}",
            file=sys.stderr,
        )
        return None
    return readiness.health(plan, objects, pods)
