"""Where a stack's Mooncake store is reached: the master and its members at the nodes' addresses.

One model for the two readers: `plan` shows it as it is (flashfleet.planning), and each host's
inventory extends it with what the roles install (flashfleet.bringup.host_vars.MooncakeLayout).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


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
