"""Contract between provisioning (flashfleet.inventory) and the Ansible hand-off
(flashfleet.bringup.contract, docs/contracts.md): every catalog stack's inventory passes the
hand-off's checks and validates against HostVars, and the docs table is the model's."""

from pathlib import Path

import pytest

from flashfleet.bringup.contract import check_inventory
from flashfleet.bringup.host_vars import TABLE_BEGIN, HostVars, with_table
from flashfleet.inventory import build_inventory
from flashfleet.planning.resolve import load_stack
from flashfleet.stack.files import list_stacks
from flashfleet.stack.kubernetes_source import KubernetesSource

DOC = (Path(__file__).resolve().parents[2] / "docs" / "contracts.md").read_text()
HOST_STACKS = [s for s in list_stacks() if not isinstance(load_stack(s).spec.nodes.source, KubernetesSource)]


def inventory_for(stack: str) -> dict:
    b = load_stack(stack)
    ssh = [f"198.51.100.{i + 10}" for i in range(len(b.nodes))]
    private = [f"10.0.0.{i + 10}" for i in range(len(b.nodes))]
    return build_inventory(b, ssh, private)


def test_catalog_has_host_stacks():
    assert {"gb300-lowlat", "gb300-pd", "h200-l3", "mi355x-agentx"} <= set(HOST_STACKS)


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_inventory_passes_the_handoff_contract(stack):
    inventory = inventory_for(stack)
    check_inventory(inventory, stack)  # raises naming the field when broken


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_every_host_of_every_catalog_stack_validates_against_the_model(stack):
    for hvars in inventory_for(stack)["all"]["hosts"].values():
        told = HostVars.model_validate(hvars)
        assert told.inventory_vars() == hvars  # nothing emitted that the model does not carry
        # PD workers serve clients only through a router (a decode answers no chat of its own).
        served = [
            launch
            for launch in told.flashfleet_processes
            if launch.serves_api and launch.role not in ("prefill", "decode")
        ]
        assert told.flashfleet_api_port == (served[-1].port if served else None)


def test_the_docs_table_is_generated_from_the_model():
    assert f"{TABLE_BEGIN}\n" in DOC, "docs/contracts.md lost its generated table markers"
    assert with_table(DOC) == DOC, "run `python -m flashfleet.bringup.host_vars` to regenerate the table"


def test_the_docs_table_check_sees_a_hand_edit():
    edited = DOC.replace("| `flashfleet_gpu_count` | int |", "| `flashfleet_gpu_count` | str |")
    assert edited != DOC
    assert with_table(edited) == DOC


def test_a_broken_inventory_is_refused_naming_the_field():
    inventory = inventory_for("h200-lowlat")
    host = next(iter(inventory["all"]["hosts"].values()))
    host["flashfleet_gpu_count"] = "8"
    with pytest.raises(Exception, match="flashfleet_gpu_count"):
        check_inventory(inventory, "h200-lowlat")


@pytest.mark.parametrize(("stack", "imex"), [("gb300-2p1d", True), ("h200-replicas", False)])
def test_the_nvlink_domain_is_every_gpu_node_by_its_private_address(stack: str, imex: bool) -> None:
    """IMEX's node list is decided in planning: each GPU node's peers reach it on the private
    network, so the list never holds the address Ansible dials (a public one on AWS)."""
    b = load_stack(stack)
    ssh = [f"198.51.100.{i + 1}" for i in range(len(b.nodes))]
    private = [f"10.0.0.{i + 1}" for i in range(len(b.nodes))]
    hosts = build_inventory(b, ssh, private)["all"]["hosts"]
    domain = [private[n.index] for n in b.gpu_nodes] if imex else []
    assert len(b.gpu_nodes) >= 2
    assert [h["flashfleet_imex_nodes"] for h in hosts.values()] == [
        domain if h["flashfleet_gpu_node"] else [] for h in hosts.values()
    ]
