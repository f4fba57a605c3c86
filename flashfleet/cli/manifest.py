"""`flashfleet manifest STACK`: every Kubernetes object a Kubernetes stack creates, in apply
order, as multi-document YAML (as `helm template` prints a chart), or a JSON list.

The same objects the Kubernetes component creates (flashfleet.k8s.manifests, pure), so what
is read here is what `pulumi up` applies. The HF token's Secret is the one object left out: the
component makes it from the `flashfleet:hfToken` secret, and its value is never printed; a
comment names it. Offline: no cluster, no Pulumi.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flashfleet.cli.common import UsageError, add_format, add_stack, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "manifest", help="the Kubernetes objects of a Kubernetes stack, as YAML (helm template)"
    )
    add_stack(p, "stack name or stack file (a stack on the kubernetes source)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    add_format(p, "yaml", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.cli.common import stack_arg, yaml_text
    from flashfleet.k8s import names, weights
    from flashfleet.k8s.errors import KubernetesRenderError
    from flashfleet.launch import SECRET_ENV_NAMES
    from flashfleet.planning import load_stack
    from flashfleet.planning.stack_recipe import kubernetes_plan
    from flashfleet.recipes.errors import RecipeError
    from flashfleet.stack import StackError

    try:
        b = load_stack(*stack_arg(args.stack, args.stacks_dir))
    except StackError as err:
        raise UsageError(str(err)) from None
    kind = b.spec.nodes.source.kind
    if kind != "kubernetes":
        raise UsageError(
            f"nodes.source.kind: manifest prints a kubernetes stack's objects; {b.stack} is on {kind!r} "
            f"(`flashfleet plan {b.stack}` shows its bring-up)"
        )
    try:
        plan = kubernetes_plan(b.stack, b.spec, b.lock)
    except (KubernetesRenderError, RecipeError) as err:
        raise UsageError(str(err)) from None
    if args.format == "json":
        print_json(list(plan.objects))
        return 0
    keys = ", ".join(SECRET_ENV_NAMES)
    print(
        f"# stack {b.stack}: {len(plan.objects)} objects in apply order, namespace {plan.namespace}\n"
        f"# not shown: Secret {plan.namespace}/{plan.secret_name} (keys {keys}), made from the\n"
        "# flashfleet:hfToken secret after the Namespace; its value is never printed\n"
        f"# the weights download containers run {weights.PROGRAM_DIR}/{weights.PROGRAM_KEY} from ConfigMap\n"
        f"# {plan.namespace}/{names.weights_program(b.stack)}: the hosts' own program, printed once there"
    )
    print(yaml_text(plan.objects, documents=True, literal_blocks=True, explicit_start=True), end="")
    return 0
