"""One admission of a stack: is it deployable? Every offline rule, run once, for every caller.

The Pulumi program (`__main__.py`), `flashfleet validate`, `plan`, `up` and `new` all call
`admit` with everything a stack is (its spec with its site section, region and lock, which
secrets it holds, and its sibling stack files beside it) and get the plan, or one StackError naming every
problem. What it runs, in order:

- the stack spec, the recipe's rules, the catalogs, the lock and the sibling stacks' namespaces
  (`planning.resolve`);
- the secret values where the caller holds them (the program does; the CLI reads the stack's
  own with `stackops`); what the stack sets for the roles is its spec's site section, checked
  with the spec;
- an API key the serving asks for must be there;
- the bring-up's own check of the inventory the program would hand it, with AWS nodes at
  placeholder addresses (`bringup.input_check`, as the provider runs it on the real one).

What needs a cloud call is left out, and `not_checked_offline` names it. The bring-up provider
keeps only the engine-side guard of the inventory it is handed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan
from flashfleet.planning.resolve import resolve
from flashfleet.stack import AwsSource, ExistingSource, KubernetesSource, StackError
from flashfleet.stack.capacity_block import reservation_id
from flashfleet.stack.errors import Problem
from flashfleet.stack.files import API_KEY_KEY, StackFile
from flashfleet.stack.placeholder_addresses import NETWORKS


def admit(sf: StackFile, secrets: Mapping[str, str | None] | None = None) -> StackPlan:
    """The plan of a deployable stack, or StackError with every problem found offline.

    ``secrets`` holds the secret values by config key where the caller has them decrypted (the
    Pulumi program): each must meet the rule the run events' redaction needs."""
    from flashfleet.bringup.errors import BringupInputError
    from flashfleet.bringup.secret_env import secret_problem

    problems: list[Problem] = []
    plan: StackPlan | None = None
    try:
        plan = resolve(sf)
    except StackError as err:
        problems += err.problems
    for key, value in (secrets or {}).items():
        if found := secret_problem(value):
            problems.append(Problem(key, *found))
    if plan is not None and plan.api_key_required and not sf.has_api_key:
        problems.append(
            Problem(
                API_KEY_KEY,
                "serving.apiKey is required and the stack has no key: "
                f"`pulumi config set --secret {API_KEY_KEY}` (it stays encrypted in the stack and state)",
                "api-key",
            )
        )
    if plan is not None and not problems:  # the inventory, from a plan every rule above accepted
        try:
            check_bringup(plan)
        except BringupInputError as err:
            problems.append(_bringup_problem(str(err)))
    if plan is None or problems:
        raise StackError(sf.name, problems)
    return plan


def _bringup_problem(line: str) -> Problem:
    """The bring-up check's one line (``<field>: <why>``, maybe ending in its own rule) as a Problem."""
    where, _, why = line.partition(": ")
    rule = "bringup-check"
    if why.endswith("]") and " [rule: " in why:
        why, _, rule = why[:-1].rpartition(" [rule: ")
    return Problem(where, why, rule)


def offline_inventory(plan: StackPlan) -> dict[str, Any] | None:
    """The inventory the program hands the bring-up (AWS nodes at placeholder addresses, with no
    host keys yet); None for a Kubernetes stack, which has no Ansible hand-off."""
    src = plan.spec.nodes.source
    if isinstance(src, KubernetesSource):
        return None
    if isinstance(src, ExistingSource):
        return build_inventory(plan, src.ssh_addresses(), src.private_addresses())
    # Where AWS nodes' addresses stand until EC2 assigns them: TEST-NET-1, never routed.
    placeholders = [str(NETWORKS[0][n.index + 1]) for n in plan.nodes]
    return build_inventory(plan, placeholders, placeholders)


def check_bringup(plan: StackPlan) -> None:
    """Raises BringupInputError (one line naming the host or role and the field) as the bring-up
    resource's check would: the inventory contract and the role arguments of site.yml (the
    stack's site section's)."""
    from flashfleet.bringup.input_check import validate
    from flashfleet.bringup.project import DEFAULT_PROJECT

    inventory = offline_inventory(plan)
    if inventory is not None:
        validate(DEFAULT_PROJECT, "site.yml", inventory, plan.site_args, stack=plan.stack)


def not_checked_offline(plan: StackPlan) -> list[str]:
    src = plan.spec.nodes.source
    if isinstance(src, AwsSource):
        # the pre-flight reads EC2 only for a reservation or block (flashfleet.capacity.reservation)
        reserved = ["the reservation or block is usable now (EC2)"] if reservation_id(plan.spec) else []
        return [*reserved, "the nodes' addresses and SSH host keys (EC2 assigns them at up)"]
    if isinstance(src, KubernetesSource):
        return ["the cluster itself (its API answers only at up)"]
    return []
