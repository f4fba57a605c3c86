"""Pulumi composition root: `pulumi up --stack <name>` (stack files in stacks/).

Admit, capacity, deploy, export: the stack as Pulumi holds it (`flashfleet:stack`, its lock,
the secrets `flashfleet:hfToken` and `flashfleet:apiKey`) goes through the
one admission every command runs (flashfleet.admission) before any resource is registered; then
the stack's capacity reservation or block and a Kubernetes stack's namespace are checked against
the cloud (pre-flight), the node source's component is built, and the outputs are exported.
"""

from datetime import UTC, datetime
from pathlib import Path

import pulumi

from flashfleet.admission import admit
from flashfleet.bench.evidence import badge_line
from flashfleet.capacity import reservation
from flashfleet.components.program import deploy
from flashfleet.k8s import namespace_owner
from flashfleet.planning.update_outage import update_view
from flashfleet.stack.errors import StackError
from flashfleet.stack.files import API_KEY_KEY, HF_TOKEN_KEY, stack_file_from_config

HERE = Path(__file__).resolve().parent
config = pulumi.Config("flashfleet")
try:  # the one admission `flashfleet validate`, `plan` and `up` run, before the first resource
    bringup = admit(
        # stacks/ beside the program (Pulumi.yaml: stackConfigDir) holds the lock and the siblings
        stack_file_from_config(
            pulumi.get_stack(),
            HERE / "stacks",
            {
                key: value
                for key, value in {
                    "flashfleet:stack": config.get_object("stack"),
                    # no longer read, so refused by name with where it moved (stack.site)
                    "flashfleet:roleVars": config.get_object("roleVars"),
                    "aws:region": pulumi.Config("aws").get("region"),
                }.items()
                if value is not None
            },
            has_hf_token=config.get("hfToken") is not None,
            has_api_key=config.get("apiKey") is not None,
        ),
        secrets={HF_TOKEN_KEY: config.get("hfToken"), API_KEY_KEY: config.get("apiKey")},
    )
except StackError as err:
    raise pulumi.RunError(str(err)) from None  # each problem on its own line, no traceback
api_key = config.get_secret("apiKey") if bringup.api_key_required else None
# The block or reservation must be usable now, before the first resource (a VPC) is created.
try:
    held = reservation.check_reservation_usable(bringup)
except reservation.CapacityRefused as err:
    raise pulumi.RunError(str(err)) from None  # one line, no traceback
# A namespace the stack creates must not exist yet, or be this stack's: `down` deletes it.
try:
    namespace_owner.check(bringup.stack, bringup.spec.nodes.source)
except namespace_owner.NamespaceRefused as err:
    raise pulumi.RunError(str(err)) from None
# What a change of options, image or weights does to the endpoint (a PD group's cut is an outage),
# in Pulumi's preview before it asks, as `flashfleet plan` and `flashfleet up` say it.
if (update := update_view(bringup)) is not None:
    pulumi.log.info(f"update: {update.text()}")
now = datetime.now(UTC)
for key, value in deploy(
    bringup,
    config.get_secret("hfToken"),
    now,
    reservation.block_end(held),
    bringup.site_args,
    api_key=api_key,
).items():
    pulumi.export(key, value)
# This stack's own badge, from its latest benchmark evidence in results/ beside the project
# (flashfleet.bench.evidence): "measured here: ...", "evidence stale: ...", or "no evidence".
pulumi.export("evidence", badge_line(bringup, HERE / "results"))
