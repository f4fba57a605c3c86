"""`flashfleet up STACK`: `pulumi up` through the Automation API (nodes, then the playbooks).

First what it will do: the stack's bring-up phases (offline, from the stack file) and Pulumi's
preview of what it creates or changes; then it asks. `--yes` answers for scripts; without a
terminal to ask on and without `--yes` it refuses (exit 2) before touching anything.

A stack on a Capacity Block or reservation is checked first (`--wait` waits for its start).

`--preview` stops after the preview (exit 0, or 1 when the preview fails): nothing is created.

On a Kubernetes stack, a pod the scheduler refuses for `--pending-grace` seconds cancels the
update, which fails with the pod and the scheduler's reason (flashfleet.cli.shared.pending_watch).

Exit status: 0 ok, 1 the update failed, 2 bad input, no Pulumi CLI, unusable capacity, or not
confirmed.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from flashfleet.cli.common import UsageError, add_stack, can_ask, confirm

if TYPE_CHECKING:
    from flashfleet.cli.shared.pending_watch import PendingWatch
    from flashfleet.planning import StackPlan
    from flashfleet.planning.plan_model import PlanView


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="bring the stack up: nodes, preparation, serving, smoke checks")
    add_stack(p, "stack name, or the path of its file in the Pulumi project's stacks/ (Pulumi.<stack>.yaml)")
    p.add_argument("--yes", action="store_true", help="do not ask (scripts); the preview is still shown")
    p.add_argument(
        "--preview", action="store_true",
        help="show the phases and Pulumi's preview, then stop: nothing is created or changed",
    )  # fmt: skip
    p.add_argument(
        "--wait",
        action="store_true",
        help="a Capacity Block or reservation that has not started: wait for its start, not refuse",
    )
    p.add_argument(
        "--pending-grace", type=float, default=120.0, metavar="SECONDS",
        help="Kubernetes stacks: how long a pod may stay unschedulable before up cancels and says why "
        "(default 120; a cluster autoscaler adding a node needs longer)",
    )  # fmt: skip
    p.set_defaults(func=run)


def kubernetes_fit(plan: StackPlan) -> None:
    """A Kubernetes stack's server pods must fit the cluster's nodes by GPUs before anything is
    applied (exit 2 with the nodes' figures). A cluster whose nodes cannot be read is left to the
    scheduler and the pending watch, with a warning."""
    from flashfleet.stack.kubernetes_source import KubernetesSource

    src = plan.spec.nodes.source
    if not isinstance(src, KubernetesSource):
        return
    from flashfleet.catalog import hardware_catalog
    from flashfleet.cli.shared import cluster_api
    from flashfleet.k8s import fit
    from flashfleet.planning.stack_recipe import kubernetes_plan

    try:
        nodes = cluster_api.nodes(src.context)
    except Exception as err:  # no kubeconfig, no access to nodes, no answer: not a refusal
        first = (str(err).strip().splitlines() or [""])[0][:160]
        print(f"flashfleet up: warning: the cluster's nodes cannot be read ({type(err).__name__}: {first}); "
              "the scheduler decides, and up reports a pod it refuses", file=sys.stderr)  # fmt: skip
        return
    hw = plan.spec.hardware
    why = fit.refusal(
        kubernetes_plan(plan.stack, plan.spec), src.node_pools[hw], hardware_catalog()[hw].vendor, nodes
    )
    if why:
        raise UsageError(f"stack {plan.stack}: flashfleet:stack.nodes.source.nodePools.{hw}: {why}")


def kubernetes_namespace(plan: StackPlan) -> None:
    """A namespace the stack would create must not be someone else's: `down` would delete it
    (exit 2, one line; the program checks it again before its first resource)."""
    from flashfleet.k8s import namespace_owner

    try:
        namespace_owner.check(plan.stack, plan.spec.nodes.source)
    except namespace_owner.NamespaceRefused as err:
        raise UsageError(f"stack {plan.stack}: {err}") from None


def pending_watch(plan: StackPlan, grace_s: float) -> AbstractContextManager[PendingWatch | None]:
    """A Kubernetes stack's scheduling watch while `pulumi up` runs; none for other sources."""
    from flashfleet.stack.kubernetes_source import KubernetesSource

    src = plan.spec.nodes.source
    if not isinstance(src, KubernetesSource):
        return nullcontext()
    from flashfleet.cli.shared.pending_watch import PendingWatch

    return PendingWatch(context=src.context, namespace=src.namespace, stack=plan.stack, grace_s=grace_s)


def capacity_usable(stack: str, plan: StackPlan, wait: bool) -> None:
    """The stack's capacity must be usable before Pulumi starts (the program checks it again)."""
    from flashfleet.stack.capacity_block import reservation_id

    if reservation_id(plan.spec) is None:
        return  # boto3 only for stacks with a reservation
    from flashfleet.capacity import reservation

    try:
        reservation.check_reservation_usable(plan, wait=wait or None)
    except reservation.CapacityRefused as err:
        raise UsageError(f"stack {stack}: {err}") from None


def _print(line: str) -> None:
    print(line, end="" if line.endswith("\n") else "\n")


def phases(data: PlanView) -> list[str]:
    """The bring-up in the order `up` runs it, from the offline plan."""
    src = data.source
    if src.kind == "aws":
        router = f" and 1 x {src.router_node.instance_type} (the router)" if src.router_node else ""
        nodes = f"create {src.gpu_nodes} x {src.instance_type}{router} in {src.region}"
        nodes += " (AWS, billed while they run)"
    elif src.kind == "kubernetes":
        nodes = f"create {', '.join(src.objects)} in namespace {src.namespace} (Kubernetes)"
    else:
        nodes = f"record the existing hosts {', '.join(src.hosts)} (no cloud resources)"
    out = [f"  1. {nodes}"]
    if src.kind != "kubernetes":
        steps = ["prepare (drivers, container runtime, image, weights)", "serve", "verify"]
        if data.mooncake:
            steps.insert(1, "Mooncake")
        out += [
            f"  2. site.yml: {' -> '.join(steps)}",
            f"     start order {' -> '.join(data.start_order)}; endpoint {data.endpoint}",
            f"     {restart_text(data)}",
        ]
    elif data.update is not None:  # Kubernetes PD: the program cuts the group
        out.append(f"     {data.update.text()}")
    out.append(f"  ttl {data.ttl}; cost {data.cost_text()}")
    return out


def restart_text(data: PlanView) -> str:
    """What a change of options or image does to the endpoint, said before it is made."""
    assert data.update is not None  # every source but Kubernetes, where up says it for PD only
    return data.update.text()


def run(args: argparse.Namespace) -> int:
    from flashfleet.admission import admit
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.secret_env import check_env_secrets
    from flashfleet.cli.common import pulumi_stack_arg
    from flashfleet.cli.shared import stackops
    from flashfleet.planning.plan_view import plan_data
    from flashfleet.stack import StackError, read_stack_file

    args.stack = pulumi_stack_arg(args.stack, "up")
    try:
        # The program's runs inherit the caller's secrets; the stack's own are checked below
        # (and again by the Pulumi program, before any resource).
        check_env_secrets()
        # The stack files of the Pulumi project `up` drives (FLASHFLEET_PULUMI_PROJECT or this checkout).
        b = admit(read_stack_file(args.stack, stackops.project_dir() / "stacks"))
    except (StackError, BringupInputError) as err:
        raise UsageError(str(err)) from None
    data = plan_data(b)
    capacity_usable(args.stack, b, args.wait)  # read-only: capacity that cannot serve is refused first
    if not stackops.cli_available():
        raise UsageError(stackops.NO_CLI)
    can_ask(yes=args.yes or args.preview)  # a preview asks nothing
    try:  # the stack's own secrets: refused here (exit 2), not by the program mid-update (exit 1)
        stackops.check_secrets(args.stack)
    except (stackops.PulumiUnavailable, stackops.PulumiError, BringupInputError) as err:
        raise UsageError(str(err)) from None  # an unreadable config (wrong passphrase) as status says it
    kubernetes_fit(b)  # read-only: a cluster whose nodes cannot hold the server pods
    kubernetes_namespace(b)  # read-only: a namespace it did not create, which `down` would delete
    recipe = f"{data.hardware} / {data.strategy} / {data.topology}, {data.badge}"
    print(f"flashfleet up {args.stack}: {recipe}")
    print("\n".join(phases(data)))
    try:
        print("pulumi preview:")
        stackops.preview(args.stack, _print)
        if args.preview:
            print(f"flashfleet up {args.stack}: preview only, nothing created or changed")
            return 0
        confirm(f"bring {args.stack} up as previewed?", yes=args.yes)
        with pending_watch(b, args.pending_grace) as watch:
            try:
                outs = stackops.up(args.stack, _print)
            except stackops.PulumiError:
                if watch is None or not watch.found:
                    raise
                for pod in watch.found:  # why, rather than the cancelled update's own last line
                    print(f"flashfleet up: {pod.line()}", file=sys.stderr)
                print(
                    f"flashfleet up: cancelled after {args.pending_grace:g} s unschedulable; what was "
                    f"created stays for `flashfleet down {args.stack}`",
                    file=sys.stderr,
                )
                return 1
    except (stackops.PulumiUnavailable, stackops.UnknownStack) as err:
        raise UsageError(str(err)) from None
    except stackops.PulumiError as err:
        print(f"flashfleet up: {err}", file=sys.stderr)
        return 1
    for key, out in sorted(outs.items()):
        if key != "inventory":
            print(f"{key}: {out.shown()}")
    return 0
