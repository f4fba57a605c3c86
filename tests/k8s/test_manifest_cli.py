"""`flashfleet manifest`: a Kubernetes stack's objects as `pulumi up` would create them.

Cross-checked against the Kubernetes component under Pulumi's mocks (what pulumi-kubernetes is
asked to create) and against the Kubernetes API schema; the HF token never appears."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
import yaml
from k8s_schema import validate
from test_k8s_component import Recorder

from flashfleet.cli import main
from flashfleet.components.kubernetes import KubernetesCluster, KubernetesClusterArgs
from flashfleet.planning import load_stack
from flashfleet.stack import list_stacks

TOKEN = "hf_manifestTOKENthatMUSTneverLEAK012345"
K8S_STACKS = [s for s in list_stacks() if load_stack(s).spec.nodes.source.kind == "kubernetes"]


def _component_objects(stack: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(kind, name) of each object the component registers, and the Secrets' names."""
    b = load_stack(stack)
    mocks = Recorder()
    pulumi.runtime.set_mocks(mocks, project="flashfleet", stack=stack, preview=False)

    @pulumi.runtime.test
    def program() -> Any:
        KubernetesCluster(
            stack,
            KubernetesClusterArgs(
                source=b.spec.nodes.source, hardware=b.spec.hardware, nodes=b.spec.nodes.count,
                recipe_for=b.recipe_for, launch_settings=b.launch_settings(), mooncake=b.spec.mooncake,
                hf_token=pulumi.Output.secret(TOKEN),
            ),
        )  # fmt: skip

    program()
    made = [r for r in mocks.resources if r.typ.startswith("kubernetes:")]
    secrets = [r.inputs["metadata"]["name"] for r in made if r.typ == "kubernetes:core/v1:Secret"]
    objects = [
        (r.typ.rsplit(":", 1)[1], r.inputs["metadata"]["name"])
        for r in made
        if r.typ != "kubernetes:core/v1:Secret"
    ]
    return objects, secrets


def test_the_catalog_has_a_kubernetes_stack() -> None:
    assert K8S_STACKS


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_manifest_is_what_the_component_creates_and_holds_no_token(
    stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLASHFLEET_HF_TOKEN", TOKEN)
    assert main(["manifest", stack]) == 0
    text = capsys.readouterr().out
    assert TOKEN not in text
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert main(["manifest", stack, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == docs  # the same objects either way
    objects, secrets = _component_objects(stack)
    # the same objects (the mocks see them in registration order, not apply order)
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(objects)
    assert docs[0]["kind"] == "Namespace"  # applied first: everything else lives in it
    for doc in docs:
        validate(doc)
    (secret,) = secrets  # left out of the output, and named in its comment
    assert f"not shown: Secret {docs[0]['metadata']['name']}/{secret}" in text


def test_a_stack_not_on_kubernetes_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "gb300-lowlat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "nodes.source.kind: manifest prints a kubernetes stack's objects; gb300-lowlat is on 'aws'" in err


def test_the_download_program_is_named_once_not_inlined_in_each_container(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from k8s_cases import pod_specs

    from flashfleet.k8s.weights import FETCH_PROGRAM

    assert main(["manifest", "mi355x-k8s"]) == 0
    out = capsys.readouterr().out
    program = FETCH_PROGRAM.read_text()
    docs = [d for d in yaml.safe_load_all(out) if d]
    (config,) = [d for d in docs if d["metadata"]["name"] == "mi355x-k8s-weights-fetch"]
    assert config["kind"] == "ConfigMap"
    assert config["data"] == {"weights_fetch.py": program}
    runs = [
        c
        for d in docs
        for pod in pod_specs(d)
        for c in [*pod.get("initContainers", []), *pod["containers"]]
        if c["name"].startswith("weights")
    ]
    assert len(runs) >= 2  # the client install and a download
    for c in runs:
        assert c["command"][:2] == ["python", "/opt/flashfleet/weights-fetch/weights_fetch.py"]
        mount = next(m for m in c["volumeMounts"] if m["name"] == "weights-fetch")
        assert mount == {
            "name": "weights-fetch",
            "mountPath": "/opt/flashfleet/weights-fetch",
            "readOnly": True,
        }
    # printed once, line by line as the file reads (a `|` block), not escaped into each argv
    first_line = program.splitlines()[0]
    assert out.count(first_line) == 1
    assert f"    {first_line}\n" in out
