"""`flashfleet down STACK`: `pulumi destroy` through the Automation API (teardown.yml runs first,
best effort), or with `--inventory FILE` teardown.yml on existing hosts without Pulumi.

It lists what it will delete (the resources in the stack's Pulumi state, or the hosts teardown.yml
will clean) and asks; `--yes` answers for scripts, and without a terminal and without `--yes` it
refuses (exit 2) before touching anything.

Exit status: 0 gone (unreachable hosts are warnings), 1 the teardown or destroy failed,
2 bad input, no Pulumi CLI, or not confirmed.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

from flashfleet.cli.common import UsageError, add_stack, can_ask, confirm


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from flashfleet.cli.shared.cliargs import add_run_args

    p = sub.add_parser("down", help="tear the stack down (pulumi destroy, or teardown.yml on existing hosts)")
    add_stack(
        p, "stack name, or the path of its file (without --inventory: in the Pulumi project's stacks/); "
        "the inventory's flashfleet_stack must match",
    )  # fmt: skip
    add_run_args(p, "teardown.yml")
    p.add_argument(
        "--purge-caches",
        action="store_true",
        help="with --inventory: delete each host's weight cache too, and the compile caches in it "
        "(teardown.keepCaches: false for this teardown); without it the caches are kept",
    )
    p.add_argument("--yes", action="store_true", help="do not ask (scripts); the list is still shown")
    p.set_defaults(func=run)


def _print(line: str) -> None:
    print(line, end="" if line.endswith("\n") else "\n")


def _hostvars(inventory: dict[str, Any]) -> dict[str, dict[str, Any]]:
    hosts = (inventory.get("all") or {}).get("hosts") or {}
    return {name: facts for name, facts in hosts.items() if isinstance(facts, dict)}


def _purging(inventory: dict[str, Any]) -> dict[str, Any]:
    """The inventory with every host's caches deleted at teardown (teardown.keepCaches: false)."""
    out = copy.deepcopy(inventory)
    for facts in _hostvars(out).values():
        facts["flashfleet_keep_caches"] = False
    return out


def _cache_lines(inventory: dict[str, Any]) -> list[str]:
    """What happens to each host's cache: deleted or kept, and how to get the other."""
    by_fate: dict[tuple[bool, str], list[str]] = {}
    for name, facts in _hostvars(inventory).items():
        if "flashfleet_model_cache_dir" in facts:
            keep = bool(facts.get("flashfleet_keep_caches", True))
            by_fate.setdefault((keep, str(facts["flashfleet_model_cache_dir"])), []).append(name)
    return [
        f"keeps the weight and compile caches in {path} on {', '.join(names)} (--purge-caches deletes them)"
        if keep
        else f"deletes the weight and compile caches in {path} on {', '.join(names)}"
        for (keep, path), names in by_fate.items()
    ]


def _kept_beyond_the_stack(stack: str) -> list[str]:
    """What `down` leaves in place by design: a Kubernetes stack's cache claim (and the namespace
    it made), an AWS stack's weights snapshot."""
    from flashfleet.cli.shared import stackops
    from flashfleet.k8s import names
    from flashfleet.planning import load_stack
    from flashfleet.stack import StackError
    from flashfleet.stack.kubernetes_source import KubernetesSource, PvcCache

    try:
        plan = load_stack(stack, stackops.project_dir() / "stacks")
    except StackError:
        return []  # the state decides what goes; a stack file that no longer loads keeps nothing
    spec, cache = plan.spec, plan.weights_snapshot
    if cache is not None:
        held = ", ".join(f"{repo}@{commit[:12]}" for repo, commit in cache.commits.items())
        return [
            f"keeps the weights snapshot of {held} (flashfleet:cache-key {cache.key}): in no stack's "
            f"state, for the next up to restore; `flashfleet sweep` deletes it once its "
            f"flashfleet:expires-at has passed ({cache.keep_days} days after the last bring-up that used it)"
        ]
    src = spec.nodes.source
    if not isinstance(src, KubernetesSource) or not isinstance(src.model_cache, PvcCache):
        return []
    claim = f"{src.namespace}/{names.model_cache_claim(stack)}"
    if not spec.keeps_caches:
        return [f"deletes the model cache claim {claim} with the rest"]
    also = f" and namespace {src.namespace}, which holds it" if src.create_namespace else ""
    return [
        f"keeps the model cache claim {claim} ({src.model_cache.size}){also}: the next up takes them "
        "over (teardown.keepCaches: false, then up, deletes them at down)"
    ]


def run(args: argparse.Namespace) -> int:
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.handoff import TeardownError, teardown, teardown_verdict
    from flashfleet.bringup.input_check import validate
    from flashfleet.cli.common import pulumi_stack_arg
    from flashfleet.cli.shared import stackops
    from flashfleet.cli.shared.cliargs import load_inventory, project_of

    args.stack = pulumi_stack_arg(args.stack, "down", inventory=args.inventory, inventory_hint=True)
    try:
        if args.inventory is None:
            if args.purge_caches:
                raise UsageError(
                    "--purge-caches: needs --inventory (existing hosts); on a Pulumi stack set "
                    "teardown.keepCaches: false in the stack file and run `pulumi up` before `down`"
                )
            if not stackops.cli_available():
                raise stackops.PulumiUnavailable(stackops.NO_CLI)
            can_ask(yes=args.yes)
            doomed = stackops.resources(args.stack)
            if not doomed:
                print(f"flashfleet down {args.stack}: the stack holds no resources; nothing to delete")
                return 0
            print(f"flashfleet down {args.stack} deletes {len(doomed)} resources (teardown.yml first):")
            print("\n".join(f"  {r}" for r in doomed))
            for line in _kept_beyond_the_stack(args.stack):
                print(f"  {line}")
            confirm(f"delete the resources of {args.stack}?", yes=args.yes)
            stackops.destroy(args.stack, _print)
            return 0
        project = project_of(args)
        inventory = load_inventory(args.inventory)
        if args.purge_caches:
            inventory = _purging(inventory)
        # the one validation of this path, before anything is asked or touched
        hosts = validate(project, args.playbook, inventory, {}, stack=args.stack)
        can_ask(yes=args.yes)
        print(f"flashfleet down {args.stack}: {args.playbook} on {', '.join(hosts)}")
        print("  stops and removes the containers and units flashfleet started there")
        for line in _cache_lines(inventory):
            print(f"  {line}")
        confirm(f"tear {args.stack} down on these hosts?", yes=args.yes)
        result = teardown(
            inventory, project=project, playbook=args.playbook, runs_root=args.runs_dir, stack=args.stack,
            checked=False,
        )  # fmt: skip
    except (stackops.PulumiUnavailable, stackops.UnknownStack, BringupInputError) as err:
        raise UsageError(str(err)) from None
    except (stackops.PulumiError, TeardownError) as err:
        print(f"flashfleet down: {err}", file=sys.stderr)
        return 1
    dark, _ = teardown_verdict(result, hosts)
    print(result.summary())
    done = [h for h in hosts if h not in dark]
    # The last line says what was and was not torn down: an unreachable host is a warning (exit 0),
    # but never reported as torn down.
    print(
        f"flashfleet down {args.stack}: torn down on {', '.join(done) or 'no host'}"
        + (f"; unreachable, left as they are: {', '.join(dark)}" if dark else "")
    )
    return 0
