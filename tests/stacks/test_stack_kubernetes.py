"""Stacks on the kubernetes node source: validated with the manifests rendered, refused with the
YAML path of the field to fix, reported that way by `flashfleet validate`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.stack import KubernetesSource, StackError, stack_path

S = "flashfleet:stack"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]
SERVER = {"cpu": 180, "memoryGib": 1800}  # what a server pod may use of its node
H200_POOL = {
    "serverResources": SERVER,
    "nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"},
    "rdmaResources": {"vpc.amazonaws.com/efa": 16},
}


def spec(doc: Doc) -> Doc:
    return doc["config"][S]


def src(doc: Doc) -> Doc:
    return spec(doc)["nodes"]["source"]


def onto_kubernetes(**source: Any) -> Callable[[Doc], None]:
    """Move a catalog stack onto the mi355x-k8s stack's cluster (with the given source keys)."""

    def change(doc: Doc) -> None:
        spec(doc)["image"]["derived"] = False
        spec(doc)["nodes"]["source"] = {
            "kind": "kubernetes",
            "namespace": "glm",
            "nodePools": {"mi355x": {"serverResources": SERVER}, "h200": H200_POOL},
            "modelCache": {"kind": "pvc", "storageClass": "fsx", "size": "2Ti"},
            **source,
        }

    return change


def refused(stacks_dir: Path, name: str = "broken") -> dict[str, str]:
    with pytest.raises(StackError) as info:
        load_stack(name, stacks_dir)
    return {p.path: p.message for p in info.value.problems}


def test_the_catalog_kubernetes_stack_renders_its_manifests() -> None:
    b = load_stack("mi355x-k8s")
    assert isinstance(b.spec.nodes.source, KubernetesSource)
    assert not any("host memory" in w for w in b.warnings)


@pytest.mark.parametrize("derived", [True, None], ids=["derived: true", "derived left at its default"])
def test_derived_image_is_refused_at_its_path(write_stack: WriteStack, derived: bool | None) -> None:
    def change(doc: Doc) -> None:
        image = spec(doc)["image"]
        image.pop("derived")
        if derived is not None:
            image["derived"] = derived

    problems = refused(write_stack("mi355x-k8s", change))
    assert list(problems) == [f"{S}.image.derived"]
    assert "sglang_image role" in problems[f"{S}.image.derived"]
    assert "derived: false" in problems[f"{S}.image.derived"]


def test_derived_image_on_hosts_is_still_fine() -> None:
    assert load_stack("mi355x-lowlat").spec.image.derived


@pytest.mark.parametrize(
    ("base", "change", "path", "fragment"),
    [
        (
            "mi355x-k8s",
            lambda d: src(d).update(nodePools={"h200": H200_POOL}),
            f"{S}.nodes.source.nodePools",
            "no node pool for mi355x",
        ),
        ("mi355x-k8s", lambda d: src(d).update(namespce="glm"), f"{S}.nodes.source.namespce", "unknown key"),
        ("mi355x-k8s", lambda d: src(d).update(namespace="GLM"), f"{S}.nodes.source.namespace", "DNS label"),
        (
            "mi355x-k8s",
            lambda d: src(d)["modelCache"].update(path="relative"),
            f"{S}.nodes.source.modelCache.path",
            "absolute",
        ),
        (
            # Two ranks on one ReadWriteOnce claim: only the renderer knows the pods.
            "h200-l3",
            onto_kubernetes(
                modelCache={
                    "kind": "pvc",
                    "storageClass": "ebs",
                    "size": "2Ti",
                    "accessMode": "ReadWriteOnce",
                }
            ),
            f"{S}.nodes.source.modelCache.accessMode",
            "ReadWriteOnce",
        ),
        (
            # Mooncake over EFA needs the device plugin's EFA resource on the pods.
            "h200-l3",
            onto_kubernetes(nodePools={"h200": {"nodeSelector": {"gpu": "h200"}, "serverResources": SERVER}}),
            f"{S}.nodes.source.nodePools.rdmaResources",
            "RDMA device-plugin resource",
        ),
        (
            "mi355x-k8s",
            lambda d: src(d).update(downloadImage="python:latest"),
            f"{S}.nodes.source.downloadImage",
            "floats",
        ),
    ],
    ids=[
        "no pool for the hardware",
        "unknown key",
        "namespace",
        "cache path",
        "RWO claim",
        "no RDMA",
        "floating download image",
    ],
)
def test_kubernetes_problems_name_the_yaml_path(
    write_stack: WriteStack, base: str, change: Callable[[Doc], None], path: str, fragment: str
) -> None:
    problems = refused(write_stack(base, change))
    assert path in problems, problems
    assert fragment in problems[path]


def test_stack_name_too_long_for_object_names(tmp_path: Path) -> None:
    name = "mi355x-k8s-" + "x" * 30
    (tmp_path / f"Pulumi.{name}.yaml").write_text(stack_path("mi355x-k8s").read_text())
    problems = refused(tmp_path, name)
    assert list(problems) == [S]
    assert "at most 36 characters" in problems[S]


def test_l3_over_efa_on_kubernetes_is_accepted(write_stack: WriteStack) -> None:
    # EFA is refused on existing hosts only: an EKS node pool exposes it through its device plugin.
    b = load_stack("broken", write_stack("h200-l3", onto_kubernetes(leaderWorkerSet=True)))
    assert b.spec.mooncake is not None
    assert b.spec.mooncake.protocol == "efa"
    assert [n.mooncake_master for n in b.nodes] == [False, False], "the master is a Deployment"
    assert [n.ssh_user for n in b.nodes] == ["-", "-"]


def test_host_tier_on_kubernetes_is_a_warning_not_a_problem(write_stack: WriteStack) -> None:
    b = load_stack("broken", write_stack("mi355x-agentx", onto_kubernetes()))
    assert b.nodes[0].host_memory_gb is None
    assert 740 <= b.nodes[0].hicache_host_gb <= 760
    assert any("HiCache host tier not checked" in w for w in b.warnings)


def test_validate_reports_kubernetes_errors_with_their_path(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks_dir = write_stack("mi355x-k8s", lambda d: src(d).update(nodePools={"h200": H200_POOL}))
    assert main(["validate", "--stacks-dir", str(stacks_dir)]) == 2
    err = capsys.readouterr().err
    assert f"FAIL stack broken: {S}.nodes.source.nodePools: no node pool for mi355x" in err
    assert "[rule: kubernetes]" in err


def test_validate_names_the_download_image_field_and_its_rule(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks_dir = write_stack("mi355x-k8s", lambda d: src(d).update(downloadImage="python"))
    assert main(["validate", "--stacks-dir", str(stacks_dir)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "downloadImage" in line]
    assert len(lines) == 1
    assert f"FAIL stack broken: {S}.nodes.source.downloadImage: 'python' floats" in lines[0]
