"""Pulumi composition root: `pulumi up --stack <name>` (stack files in stacks/).

Reads `flashfleet:stack` and the secret `flashfleet:hfToken` once, validates the whole stack
before any resource is registered, checks the stack's capacity reservation or block (pre-flight),
builds the node source's component and exports the outputs.
"""

from datetime import UTC, datetime

import pulumi

from flashfleet.capacity import preflight
from flashfleet.components.program import deploy
from flashfleet.planning import parse_spec, resolve_spec

config = pulumi.Config("flashfleet")
stack = pulumi.get_stack()
bringup = resolve_spec(
    stack,
    parse_spec(stack, config.require_object("stack")),
    region=pulumi.Config("aws").get("region"),
    has_hf_token=config.get("hfToken") is not None,
)
# The block or reservation must be usable now, before the first resource (a VPC) is created.
try:
    reservation = preflight.run(bringup)
except preflight.CapacityRefused as err:
    raise pulumi.RunError(str(err)) from None  # one line, no traceback
now = datetime.now(UTC)
for key, value in deploy(
    bringup, config.get_secret("hfToken"), now, preflight.block_end(reservation)
).items():
    pulumi.export(key, value)
