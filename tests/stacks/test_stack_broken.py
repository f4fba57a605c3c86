"""Broken stack files are refused with messages that name the YAML path of the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.planning import load_stack
from flashfleet.stack import StackError

S = "flashfleet:stack"
Doc = dict[str, Any]


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def src(doc: Doc) -> Doc:
    return spec(doc)["nodes"]["source"]


def drop_includes(d: Doc) -> None:
    spec(d)["image"].pop("includes")


def l3_without_mooncake(d: Doc) -> None:
    spec(d).pop("mooncake")


# (id, base stack, change, expected path, fragment of the message)
CASES: list[tuple[str, str, Callable[[Doc], None], str, str]] = [
    (
        "unknown key",
        "h200-lowlat",
        lambda d: src(d).update(instanceTyp="p5en.48xlarge"),
        f"{S}.nodes.source.instanceTyp",
        "unknown key",
    ),
    (
        "unknown top-level key",
        "h200-lowlat",
        lambda d: spec(d).update(replicas=2),
        f"{S}.replicas",
        "unknown key",
    ),
    (
        "unknown key in a union branch",
        "h200-lowlat",
        lambda d: src(d)["network"].update(vpcId="vpc-12345678"),
        f"{S}.nodes.source.network.vpcId",
        "unknown key",
    ),
    (
        "checkpoint precision on the wrong hardware",
        "h200-lowlat",
        lambda d: spec(d)["options"].update(precision="mxfp4"),
        f"{S}.options.precision",
        "MI355X only",
    ),
    (
        "checkpoint of another precision",
        "gb300-lowlat",
        lambda d: spec(d)["options"].update(checkpoint="nvidia/GLM-5.3-Flash-NVFP4"),
        f"{S}.options.checkpoint",
        "not a checkpoint of precision fp8",
    ),
    (
        "host tier does not fit",
        "mi355x-agentx",
        lambda d: src(d)["hosts"][0].update(hostMemoryGib=512),
        f"{S}.options.hicache_size",
        "does not fit",
    ),
    (
        "host tier plus store segment does not fit",
        "h200-l3",
        lambda d: d["config"][S]["mooncake"].update(globalSegmentGib=1500),
        f"{S}.options.hicache_size",
        "does not fit",
    ),
    (
        "L3 without Mooncake hosts",
        "h200-l3",
        l3_without_mooncake,
        f"{S}.mooncake",
        "needs the Mooncake L3 tier",
    ),
    (
        "Mooncake without L3",
        "h200-lowlat",
        lambda d: spec(d).update(mooncake={"protocol": "efa", "globalSegmentGib": 64}),
        f"{S}.mooncake",
        "only with options.hicache: l1l2l3",
    ),
    (
        "Mooncake master past the last node",
        "h200-l3",
        lambda d: spec(d)["mooncake"].update(masterNode=2),
        f"{S}.mooncake.masterNode",
        "does not exist",
    ),
    (
        "Mooncake over verbs on AWS",
        "h200-l3",
        lambda d: spec(d)["mooncake"].update(protocol="rdma"),
        f"{S}.mooncake.protocol",
        "EFA",
    ),
    (
        "PD with speculative flags",
        "gb300-pd",
        lambda d: spec(d)["options"].update(speculative="eagle"),
        f"{S}.options.speculative",
        "does not start under PD",
    ),
    ("TTL missing", "h200-lowlat", lambda d: spec(d).pop("ttl"), f"{S}.ttl", "Field required"),
    ("TTL not a duration", "h200-lowlat", lambda d: spec(d).update(ttl="8 hours"), f"{S}.ttl", "duration"),
    ("TTL too long", "h200-lowlat", lambda d: spec(d).update(ttl="30d"), f"{S}.ttl", "between"),
    (
        "0.0.0.0/0 without the explicit flag",
        "h200-lowlat",
        lambda d: src(d).update(allowedCidrs=["0.0.0.0/0"]),
        f"{S}.nodes.source.allowedCidrs",
        "allowPublicIngress",
    ),
    (
        "no allowed CIDR",
        "h200-lowlat",
        lambda d: src(d).update(allowedCidrs=[]),
        f"{S}.nodes.source.allowedCidrs",
        "at least 1",
    ),
    (
        "not a CIDR",
        "h200-lowlat",
        lambda d: src(d).update(allowedCidrs=["office"]),
        f"{S}.nodes.source.allowedCidrs[0]",
        "IPv4",
    ),
    (
        "GB300 without a capacity block",
        "gb300-lowlat",
        lambda d: src(d).update(capacity={"kind": "on-demand"}),
        f"{S}.nodes.source.capacity",
        "Capacity Blocks only",
    ),
    (
        "placement group with a capacity block",
        "gb300-lowlat",
        lambda d: src(d).update(placementGroup=True),
        f"{S}.nodes.source",
        "placementGroup",
    ),
    (
        "MI355X on AWS",
        "h200-lowlat",
        lambda d: spec(d).update(hardware="mi355x"),
        f"{S}.nodes.source.kind",
        "no AWS instance type",
    ),
    (
        "instance type of other hardware",
        "h200-lowlat",
        lambda d: src(d).update(instanceType="p6e-gb300.36xlarge"),
        f"{S}.nodes.source.instanceType",
        "the stack's hardware is h200",
    ),
    (
        "instance type not in the catalog",
        "h200-lowlat",
        lambda d: src(d).update(instanceType="p4d.24xlarge"),
        f"{S}.nodes.source.instanceType",
        "not in the instance catalog",
    ),
    (
        "unknown source kind",
        "h200-lowlat",
        lambda d: src(d).update(kind="gcp"),
        f"{S}.nodes.source",
        "does not match any of the expected tags",
    ),
    (
        "host of other hardware",
        "mi355x-lowlat",
        lambda d: src(d)["hosts"][0]["gpus"].update(model="h200"),
        f"{S}.nodes.source.hosts[0].gpus.model",
        "the stack's hardware is mi355x",
    ),
    (
        "host with too few GPUs",
        "mi355x-lowlat",
        lambda d: src(d)["hosts"][0]["gpus"].update(count=2),
        f"{S}.nodes.source.hosts[0].gpus.count",
        "4 GPUs but has 2",
    ),
    (
        "count differs from listed hosts",
        "mi355x-lowlat",
        lambda d: spec(d)["nodes"].update(count=2),
        f"{S}.nodes",
        "lists 1 machines",
    ),
    (
        "single-node topology on two nodes",
        "gb300-pd",
        lambda d: spec(d)["nodes"].update(count=2),
        f"{S}.nodes.count",
        "pd on one node is the seed's validated pair",
    ),
    (
        "nodes as an option",
        "h200-lowlat",
        lambda d: spec(d)["options"].update(nodes=2),
        f"{S}.options",
        "nodes.count",
    ),
    (
        "misspelled option",
        "h200-lowlat",
        lambda d: spec(d)["options"].update(kv_dsaa="bf16-tilelang"),
        f"{S}.options.kv_dsaa",
        "unknown option",
    ),
    (
        "bad option value",
        "h200-lowlat",
        lambda d: spec(d)["options"].update(kv_dsa="fp8-trtllm"),
        f"{S}.options.kv_dsa",
        "disabled on NVIDIA H200",
    ),
    ("host tier without its build", "mi355x-agentx", drop_includes, f"{S}.image", "#42178"),
    (
        "floating image tag",
        "h200-lowlat",
        lambda d: spec(d)["image"].update(tag="latest"),
        f"{S}.image",
        "floats",
    ),
    (
        "image before GLM-5.3-Flash",
        "h200-lowlat",
        lambda d: spec(d)["image"].update(version="v0.5.19"),
        f"{S}.image.version",
        "predates",
    ),
    (
        "HF token in plain text",
        "h200-lowlat",
        lambda d: d["config"].update({"flashfleet:hfToken": "hf_plain"}),
        "flashfleet:hfToken",
        "must be a Pulumi secret",
    ),
    (
        "unknown project config key",
        "h200-lowlat",
        lambda d: d["config"].update({"flashfleet:stak": {}}),
        "flashfleet:stak",
        "unknown config key",
    ),
    (
        "the free-form role arguments of old",
        "h200-lowlat",
        lambda d: d["config"].update({"flashfleet:roleVars": {"nvidia_driver_repo_url": "http://10.0.0.1/"}}),
        "flashfleet:roleVars",
        "no longer read: what a stack sets for the roles is flashfleet:stack.site",
    ),
    (
        "a site key the section does not have",
        "h200-lowlat",
        lambda d: d["config"]["flashfleet:stack"].update(
            {"site": {"apt": {"cuda": "http://10.0.0.1/"}, "marker_dir": "/etc"}}
        ),
        "flashfleet:stack.site.marker_dir",
        "unknown key",
    ),
    (
        "AWS stack without a region",
        "h200-lowlat",
        lambda d: d["config"].pop("aws:region"),
        "aws:region",
        "region",
    ),
    (
        "root volume too small for the weights",
        "h200-lowlat",
        lambda d: src(d).update(rootVolumeGib=200),
        f"{S}.nodes.source.rootVolumeGib",
        "below",
    ),
    (
        "malformed reservation id",
        "gb300-lowlat",
        lambda d: src(d)["capacity"].update(reservationId="my-block"),
        f"{S}.nodes.source.capacity.reservationId",
        "not a cr-",
    ),
]


@pytest.mark.parametrize(
    ("base", "change", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_broken_stack_is_refused_naming_the_field(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
    base: str,
    change: Callable[[Doc], None],
    path: str,
    fragment: str,
) -> None:
    stacks_dir = write_stack(base, change)
    with pytest.raises(StackError) as info:
        load_stack("broken", stacks_dir)
    problems = {p.path: p.message for p in info.value.problems}
    assert path in problems, f"expected {path}, got {problems}"
    assert fragment in problems[path], problems[path]
    assert path in str(info.value), "the printed error names the path"


def test_every_problem_is_reported_at_once(write_stack: Callable[[str, Callable[[Doc], None]], Path]) -> None:
    def two(d: Doc) -> None:
        spec(d).pop("ttl")
        src(d).update(allowedCidrs=["0.0.0.0/0"])

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("h200-lowlat", two))
    assert set(info.value.paths()) == {f"{S}.ttl", f"{S}.nodes.source.allowedCidrs"}


@pytest.mark.parametrize("base", ["mi355x-lowlat", "h200-lowlat"])
def test_mistakes_of_every_stage_are_reported_in_one_run(
    base: str, write_stack: Callable[[str, Callable[[Doc], None]], Path]
) -> None:
    """A shape error (count 0) no longer hides the recipe's: an unknown hardware and a bad
    option value are named beside it, and two bad options both, not one fix at a time."""

    def three(d: Doc) -> None:
        spec(d).update(hardware="h20")
        spec(d)["nodes"]["count"] = 0
        spec(d).setdefault("options", {}).update(hicache="l1l3")

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack(base, three))
    assert set(info.value.paths()) == {f"{S}.hardware", f"{S}.nodes.count", f"{S}.options.hicache"}

    def options(d: Doc) -> None:
        spec(d).setdefault("options", {}).update(hicache="l1l3", speculative="maybe", colour="red")

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack(base, options))
    assert set(info.value.paths()) == {f"{S}.options.{n}" for n in ("hicache", "speculative", "colour")}


def test_public_ingress_with_the_explicit_flag_is_accepted(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
) -> None:
    stacks_dir = write_stack(
        "h200-lowlat", lambda d: src(d).update(allowedCidrs=["0.0.0.0/0"], allowPublicIngress=True)
    )
    b = load_stack("broken", stacks_dir)
    assert [str(c) for c in b.spec.nodes.source.allowed_cidrs] == ["0.0.0.0/0"]  # type: ignore[union-attr]


def test_unknown_stack_names_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.one.yaml").write_text("config: {}\n")
    with pytest.raises(StackError, match=r"no such stack \(known: one\)"):
        load_stack("two", tmp_path)


def test_invalid_yaml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  flashfleet:stack: [\n")
    with pytest.raises(StackError, match="not valid YAML"):
        load_stack("bad", tmp_path)
