"""Every committed stack file validates, renders and matches what its name promises."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flashfleet.catalog.instances import instance_catalog
from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.stack import AwsSource, ExistingSource, KubernetesSource, list_stacks
from flashfleet.stack.mooncake_endpoints import MooncakeEndpoints

CATALOG = {
    # name: (hardware, strategy, topology, source kind, nodes)
    "gb300-lowlat": ("gb300", "low-latency", "unified", "aws", 1),
    "gb300-throughput": ("gb300", "high-throughput", "unified", "aws", 1),
    "gb300-encoder-disagg": ("gb300", "low-latency", "encoder-disagg", "aws", 1),
    "gb300-prefill-cp": ("gb300", "low-latency", "prefill-cp", "aws", 1),
    "gb300-pd": ("gb300", "high-throughput", "pd", "aws", 1),
    "h200-lowlat": ("h200", "low-latency", "unified", "aws", 1),
    "h200-throughput": ("h200", "high-throughput", "unified", "aws", 1),
    "h200-l3": ("h200", "low-latency", "unified", "aws", 2),
    "mi355x-lowlat": ("mi355x", "low-latency", "unified", "existing", 1),
    "mi355x-throughput": ("mi355x", "high-throughput", "unified", "existing", 1),
    "mi355x-agentx": ("mi355x", "low-latency", "unified", "existing", 1),
    "mi355x-k8s": ("mi355x", "low-latency", "unified", "kubernetes", 1),
    "h200-replicas": ("h200", "high-throughput", "unified", "aws", 2),
    "gb300-2p1d": ("gb300", "high-throughput", "pd", "aws", 3),
    "mi355x-replicas": ("mi355x", "high-throughput", "unified", "existing", 2),
    "mi355x-k8s-replicas": ("mi355x", "high-throughput", "unified", "kubernetes", 2),
}


def test_the_catalog_is_exactly_the_committed_files() -> None:
    assert set(list_stacks()) == set(CATALOG)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_stack_validates_as_named(name: str) -> None:
    b = load_stack(name)
    hardware, strategy, topology, kind, count = CATALOG[name]
    assert (b.spec.hardware, b.spec.strategy, b.spec.topology) == (hardware, strategy, topology)
    assert b.spec.nodes.source.kind == kind
    assert len(b.nodes) == count
    assert b.recipe.processes, "the recipe renders processes"
    assert all(launches for launches in b.launches_by_node().values()), "every node runs something"
    if kind == "aws":
        assert isinstance(b.spec.nodes.source, AwsSource)
        assert b.region, "AWS stacks name their region"
        assert b.instance is not None
        assert b.instance.hardware == hardware
    elif kind == "kubernetes":
        assert isinstance(b.spec.nodes.source, KubernetesSource)
        assert not b.spec.image.derived, "a cluster pulls its image"
    else:
        assert isinstance(b.spec.nodes.source, ExistingSource)


def test_agentx_is_the_verified_measured_config_with_its_build_requirement() -> None:
    b = load_stack("mi355x-agentx")
    o = b.recipe.options
    assert (o.precision, o.hicache, o.hicache_size, o.speculative) == ("mxfp4", "l1l2", 180, "eagle")
    assert b.recipe.badge == "Verified"
    assert "#42178" in b.spec.image.includes
    # 4 ranks x 180 GB with the state/indexer copies: about 750 GB of host memory per node.
    assert 740 <= b.nodes[0].hicache_host_gb <= 760


def test_pd_stack_has_no_speculative_flags() -> None:
    b = load_stack("gb300-pd")
    assert b.recipe.options.speculative == "off"
    assert not any(w.startswith("--speculative") for p in b.recipe.processes for w in p.argv)
    assert [p.name for p in b.recipe.start_order()] == ["prefill", "decode", "router"]


def test_l3_stack_spans_nodes_with_a_mooncake_master() -> None:
    b = load_stack("h200-l3")
    assert b.spec.mooncake is not None
    assert b.recipe.options.hicache == "l1l2l3"
    assert [n.mooncake_master for n in b.nodes] == [True, False]
    layout = MooncakeEndpoints.of(b.spec.mooncake, ["10.0.0.1", "10.0.0.2"]).model_dump()
    assert layout["master_server_address"] == "10.0.0.1:50051"
    assert layout["metadata_server"] == "http://10.0.0.1:8080/metadata"
    assert layout["protocol"] == "efa"


def test_gb300_stacks_use_capacity_blocks_without_placement_groups() -> None:
    for name in (n for n in CATALOG if n.startswith("gb300")):
        src = load_stack(name).spec.nodes.source
        assert isinstance(src, AwsSource)
        assert src.capacity.kind == "block"
        assert not src.uses_placement_group


def test_instance_catalog_keeps_unknowns_unknown() -> None:
    cat = instance_catalog()
    p5en = cat["p5en.48xlarge"]
    assert (p5en.gpus, p5en.host_memory_gib, p5en.efa_network_cards) == (8, 2048, 16)
    gb = cat["p6e-gb300.36xlarge"]
    assert (gb.gpus, gb.arch, gb.capacity) == (4, "arm64", "block-only")
    assert gb.host_memory_gib is None
    assert gb.efa_network_cards is None
    assert gb.vcpus is None
    assert {"host_memory_gib", "efa_network_cards", "vcpus"} <= set(gb.unknown)
    # a price only with its source and date; GB300 has no published on-demand price
    for t in cat.values():
        assert (not t.prices_by_region) == (t.price_source is None) == (t.price_date is None), t.name
        assert t.price_usd_per_hour is None  # a region's price is the plan's to pick
    assert not gb.prices_by_region
    assert "price_usd_per_hour" in gb.unknown
    assert p5en.prices_by_region["us-east-2"] == 63.296
    assert p5en.prices_by_region["us-west-1"] == 79.12
    assert "dstackai/dstack PR #4110" in (p5en.price_source or "")
    assert p5en.price_date == "2026-08-06"
    assert "price_usd_per_hour" in p5en.secondary  # read from a peer's listing, not AWS's own page


def test_kubernetes_stack_nodes_come_from_the_catalog() -> None:
    b = load_stack("mi355x-k8s")
    src = b.spec.nodes.source
    assert isinstance(src, KubernetesSource)
    assert (src.namespace, src.context, src.service_type) == ("glm", "mi355x-cluster", "ClusterIP")
    assert set(src.node_pools) == {"mi355x"}
    [node] = b.nodes
    # A pod on one catalog node: 8 MI355X GPUs (4 serve), host memory unknown, no SSH.
    assert (node.gpu_count, node.host_memory_gb) == (8, None)
    assert (node.address, node.private_address, node.ssh_user) == (None, None, "-")
    assert node.instance_type is None
    assert b.instance is None
    assert b.region is None
    assert b.launches_by_node()[0][0].image == "lmsysorg/sglang:v0.5.23-rocm720-mi35x"


@pytest.mark.parametrize(
    ("region", "hourly"),
    [("us-east-2", 63.296), ("us-west-1", 79.12), ("eu-north-1", 67.7267), ("ap-south-1", None)],
)
def test_the_cost_is_the_price_of_the_stacks_region(
    write_stack: Any, capsys: pytest.CaptureFixture[str], region: str, hourly: float | None
) -> None:
    """The listed price differs by region: us-west-1 is not billed at us-east-2's rate, and a
    region the catalog lists no price for has no cost, not another region's."""

    def move(doc: dict[str, Any]) -> None:
        doc["config"]["aws:region"] = region
        doc["config"]["flashfleet:stack"]["nodes"]["source"]["network"]["availabilityZone"] = f"{region}a"

    stacks = write_stack("h200-lowlat", move)
    assert main(["plan", "broken", "--stacks-dir", str(stacks), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["hourly_cost_usd"] == hourly
    if hourly is not None:
        assert plan["price_source"].endswith(f"({region})")
    else:
        assert plan["price_source"] is None


@pytest.mark.parametrize("zone", ["us-west-1a", "us-east-1b", "us-east-2", "us-east-20a"])
def test_a_zone_outside_the_stacks_region_is_refused(
    write_stack: Any, capsys: pytest.CaptureFixture[str], zone: str
) -> None:
    stacks = write_stack(
        "h200-lowlat",
        lambda doc: doc["config"]["flashfleet:stack"]["nodes"]["source"]["network"].update(
            availabilityZone=zone
        ),
    )
    assert main(["validate", "broken", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert "nodes.source.network.availabilityZone" in err
    assert f"{zone} is not a zone of the stack's region us-east-2" in err
    assert "[rule: zone-in-region]" in err


def _instance_type(kind: str) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["config"]["flashfleet:stack"]["nodes"]["source"]["instanceType"] = kind

    return change


def test_a_p5e_stack_validates_and_plans_eight_h200s_at_an_unknown_price(
    write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = write_stack("h200-lowlat", _instance_type("p5e.48xlarge"))
    assert main(["validate", "broken", "--stacks-dir", str(stacks)]) == 0
    capsys.readouterr()
    assert main(["plan", "broken", "--stacks-dir", str(stacks), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["source"]["instance_type"] == "p5e.48xlarge"
    assert (plan["source"]["arch"], plan["source"]["efa_network_cards"]) == ("x86_64", 32)
    [node] = plan["nodes"]
    assert (node["instance_type"], node["gpu_count"]) == ("p5e.48xlarge", 8)
    assert plan["hardware"] == "h200"
    # no public on-demand price: unknown, not p5en's
    assert (plan["hourly_cost_usd"], plan["price_source"]) == (None, None)
    p5e = instance_catalog()["p5e.48xlarge"]
    assert "price_usd_per_hour" in p5e.unknown
    assert main(["plan", "broken", "--stacks-dir", str(stacks)]) == 0
    [cost] = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("cost ")]
    assert "unknown" in cost, cost


def test_a_stack_without_an_instance_type_still_gets_p5en() -> None:
    b = load_stack("h200-lowlat")
    assert b.instance is not None
    assert b.instance.name == "p5en.48xlarge"


def test_an_instance_type_not_in_the_catalog_is_still_refused(
    write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = write_stack("h200-lowlat", _instance_type("p5x.48xlarge"))
    assert main(["validate", "broken", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert "nodes.source.instanceType" in err
    assert "'p5x.48xlarge' is not in the instance catalog" in err
    assert "p5e.48xlarge" in err  # the known types are named
