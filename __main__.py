"""Pulumi composition root: `pulumi up --stack <name>` (stack files in stacks/).

Reads `flashfleet:stack`, the stack's lock, the secrets `flashfleet:hfToken` and
`flashfleet:apiKey` and `flashfleet:roleVars` once,
validates the whole stack before any resource is registered, checks the stack's capacity
reservation or block and a Kubernetes stack's namespace (pre-flight), builds the node source's
component and exports the outputs.
"""

from datetime import UTC, datetime
from pathlib import Path

import pulumi

from flashfleet.bench.evidence import badge_line
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import DEFAULT_PROJECT
from flashfleet.bringup.role_vars import STACK_PLAYBOOKS, check_role_vars
from flashfleet.bringup.secret_env import check_secret
from flashfleet.capacity import preflight
from flashfleet.components.program import deploy
from flashfleet.k8s import namespace_owner
from flashfleet.planning import parse_spec, resolve_spec
from flashfleet.stack.errors import StackError
from flashfleet.stack.files import API_KEY_KEY, HF_TOKEN_KEY, read_stack_lock

config = pulumi.Config("flashfleet")
stack = pulumi.get_stack()
# Role arguments for every bring-up run (apt and Hub mirrors of an air-gapped site, say); they
# move what the stack's lock must pin, so the stack is resolved with them.
role_vars = config.get_object("roleVars") or {}
if not isinstance(role_vars, dict):
    raise pulumi.RunError("flashfleet:roleVars: must be a mapping of role argument names to values")
try:  # the rules `flashfleet validate` and the bring-up's check apply, before the first resource
    check_role_vars(DEFAULT_PROJECT, STACK_PLAYBOOKS, role_vars)
except BringupInputError as err:
    raise pulumi.RunError(str(err)) from None
try:
    bringup = resolve_spec(
        stack,
        parse_spec(stack, config.require_object("stack")),
        region=pulumi.Config("aws").get("region"),
        has_hf_token=config.get("hfToken") is not None,
        has_api_key=config.get("apiKey") is not None,
        # stacks/<stack>.lock.yaml beside the stack file (Pulumi.yaml: stackConfigDir)
        lock=read_stack_lock(stack, Path(__file__).resolve().parent / "stacks"),
        role_vars=role_vars,
    )
except StackError as err:
    raise pulumi.RunError(str(err)) from None  # each problem on its own line, no traceback
try:  # a secret the run events cannot be redacted of is refused before any resource
    check_secret(HF_TOKEN_KEY, config.get("hfToken"))
    check_secret(API_KEY_KEY, config.get("apiKey"))
except BringupInputError as err:
    raise pulumi.RunError(str(err)) from None
api_key = config.get_secret("apiKey")
if bringup.api_key_required and api_key is None:
    raise pulumi.RunError(
        "flashfleet:stack.serving.apiKey: required, and no key: "
        "`pulumi config set --secret flashfleet:apiKey` (it stays encrypted in the stack and state)"
    )
# The block or reservation must be usable now, before the first resource (a VPC) is created.
try:
    reservation = preflight.check_capacity(bringup)
except preflight.CapacityRefused as err:
    raise pulumi.RunError(str(err)) from None  # one line, no traceback
# A namespace the stack creates must not exist yet, or be this stack's: `down` deletes it.
try:
    namespace_owner.check(bringup.stack, bringup.spec.nodes.source)
except namespace_owner.NamespaceRefused as err:
    raise pulumi.RunError(str(err)) from None
now = datetime.now(UTC)
for key, value in deploy(
    bringup,
    config.get_secret("hfToken"),
    now,
    preflight.block_end(reservation),
    role_vars,
    api_key=api_key if bringup.api_key_required else None,
).items():
    pulumi.export(key, value)
# This stack's own badge, from its latest benchmark evidence in results/ beside the project
# (flashfleet.bench.evidence): "measured here: ...", "evidence stale: ...", or "no evidence".
pulumi.export("evidence", badge_line(bringup, Path(__file__).resolve().parent / "results"))
