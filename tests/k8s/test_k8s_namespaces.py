"""Two Kubernetes stacks of one project in one namespace, where one creates it, are refused: the
creator's `down` deletes the namespace, and every object of the other stack with it (seen on a
real control plane: after `pulumi destroy` of one stack, the other's Deployments were gone)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.files import stack_path

S = "flashfleet:stack"


def two_stacks(
    tmp_path: Path, *, namespace: str, creates: tuple[bool, bool], contexts: tuple[str, str]
) -> Path:
    for stack, create, context in zip(("mi355x-k8s", "mi355x-k8s-replicas"), creates, contexts, strict=True):
        doc = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text())
        source = doc["config"][S]["nodes"]["source"]
        source.update(namespace=namespace, createNamespace=create, context=context)
        stack_path(stack, tmp_path).write_text(yaml.safe_dump(doc))
    return tmp_path


def validate(stacks_dir: Path, stack: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["validate", stack, "--stacks-dir", str(stacks_dir)])
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize("creates", [(True, True), (True, False), (False, True)])
def test_a_namespace_one_stack_creates_cannot_hold_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], creates: tuple[bool, bool]
) -> None:
    d = two_stacks(tmp_path, namespace="glm", creates=creates, contexts=("c1", "c1"))
    for stack, other in (("mi355x-k8s", "mi355x-k8s-replicas"), ("mi355x-k8s-replicas", "mi355x-k8s")):
        rc, err = validate(d, stack, capsys)
        assert rc == 2
        (line,) = err.splitlines()
        assert (
            f"{S}.nodes.source.namespace: stack {other} also deploys to namespace glm of context c1" in line
        )
        creator = "this stack" if creates[stack == "mi355x-k8s-replicas"] else other
        assert f"and {creator} creates it" in line


@pytest.mark.parametrize(
    ("namespace", "creates", "contexts"),
    [
        ("glm", (False, False), ("c1", "c1")),  # shared, owned by neither: nobody deletes it
        ("glm", (True, True), ("c1", "c2")),  # two clusters
    ],
)
def test_stacks_that_cannot_delete_each_others_objects_pass(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    namespace: str,
    creates: tuple[bool, bool],
    contexts: tuple[str, str],
) -> None:
    d = two_stacks(tmp_path, namespace=namespace, creates=creates, contexts=contexts)
    for stack in ("mi355x-k8s", "mi355x-k8s-replicas"):
        assert validate(d, stack, capsys)[0] == 0


def test_the_catalog_stacks_have_namespaces_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for stack in ("mi355x-k8s", "mi355x-k8s-replicas"):
        shutil.copy(stack_path(stack, DEFAULT_STACKS_DIR), stack_path(stack, tmp_path))
    for stack in ("mi355x-k8s", "mi355x-k8s-replicas"):
        assert validate(tmp_path, stack, capsys)[0] == 0
