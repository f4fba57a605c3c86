"""Existing-hosts node source: machines the user already has (MI355X bare metal, say).

No cloud resources: the component records the listed addresses so the program's outputs and
inventory have the same shape as with the AWS source.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from flashfleet.planning import StackPlan
from flashfleet.stack.spec import ExistingSource


@dataclass(frozen=True)
class ExistingHostsArgs:
    plan: StackPlan


class ExistingHosts(pulumi.ComponentResource):
    ssh_addresses: pulumi.Output[list[str]]
    private_addresses: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: ExistingHostsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("flashfleet:nodes:ExistingHosts", name, {}, opts)
        src = args.plan.spec.nodes.source
        assert isinstance(src, ExistingSource)
        ssh, private = src.ssh_addresses(), src.private_addresses()
        self.ssh_addresses = pulumi.Output.from_input(ssh)
        self.private_addresses = pulumi.Output.from_input(private)
        self.register_outputs(
            {"sshAddresses": self.ssh_addresses, "privateAddresses": self.private_addresses}
        )
