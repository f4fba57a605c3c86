"""Where a stack's Mooncake store is reached: the master and its members at the nodes' addresses.

One model for the two readers: `plan` shows it as it is (flashfleet.planning), and each host's
inventory extends it with what the roles install (flashfleet.bringup.host_vars.MooncakeLayout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from flashfleet.stack.spec import Mooncake


class MooncakeEndpoints(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    master_node: int
    master_host: str
    master_server_address: str  # host:rpc_port, as SGLang's store config wants it
    metadata_server: str  # URL, as SGLang's store config wants it
    rpc_port: int
    metadata_port: int
    metrics_port: int
    protocol: Literal["rdma", "efa", "tcp"]
    global_segment_gib: int
    devices: list[str]
    members: list[str]  # private addresses, by node index

    @classmethod
    def of(cls, store: Mooncake, addresses: Sequence[str]) -> MooncakeEndpoints:
        """The stack's store (`mooncake:` of the spec) at the nodes' private addresses."""
        host = addresses[store.master_node]
        return cls(
            master_node=store.master_node,
            master_host=host,
            master_server_address=f"{host}:{store.rpc_port}",
            metadata_server=f"http://{host}:{store.metadata_port}/metadata",
            rpc_port=store.rpc_port,
            metadata_port=store.metadata_port,
            metrics_port=store.metrics_port,
            protocol=store.protocol,
            global_segment_gib=store.global_segment_gib,
            devices=list(store.devices),
            members=list(addresses),
        )
