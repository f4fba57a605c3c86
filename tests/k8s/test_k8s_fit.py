"""A stack whose server pod asks for more GPUs than a node of its pool offers is refused offline,
with both numbers, before anything is applied (the scheduler would leave the pod Pending; the
real scheduler's own refusal is tests/k8s/cluster/test_scheduling.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_k8s_hardening import SOURCE, validate_err, write_stack

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import kubernetes_plan


def pool_gpus(gpus: int) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["config"]["flashfleet:stack"]["nodes"]["source"]["nodePools"]["mi355x"]["gpusPerNode"] = gpus

    return change


def test_a_pool_that_offers_too_few_gpus_is_refused_with_the_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = validate_err(tmp_path, pool_gpus(2), capsys)
    assert line.startswith(f"FAIL stack broken: {SOURCE}.nodePools.mi355x.gpusPerNode: ")
    assert "the pod of node 0 (server) asks for 4 amd.com/gpu; each node of the pool offers 2" in line


def test_the_same_stack_fits_a_pool_that_offers_exactly_its_gpus(tmp_path: Path) -> None:
    b = load_stack("broken", write_stack(tmp_path, pool_gpus(4)))
    plan = kubernetes_plan("broken", b.spec)
    (server,) = (o for o in plan.objects if o["kind"] == "Deployment")
    assert server["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == 4


def test_a_cluster_stack_is_refused_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stacks_dir = write_stack(tmp_path, pool_gpus(3), base="mi355x-k8s-replicas")
    assert main(["validate", "broken", "--stacks-dir", str(stacks_dir)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the pod of node 0 (replica-0) asks for 4 amd.com/gpu; each node of the pool offers 3" in line


@pytest.mark.parametrize("gpus", [0, 65, "8"])
def test_gpus_per_node_is_a_whole_number_in_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpus: object
) -> None:
    line = validate_err(tmp_path, pool_gpus(gpus), capsys)  # type: ignore[arg-type]
    assert "gpusPerNode" in line
