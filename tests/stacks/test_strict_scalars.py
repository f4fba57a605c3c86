"""Switches and numbers of a stack are what they say: `true`/`false` only, never "yes", 1 or
"on" (YAML 1.1 reads `on` unquoted as true, so the quoted forms are the ones that reach the spec
as text); a number never a boolean or a numeric string. The finding's case first: a Kubernetes
LoadBalancer open to the internet with `allowPublicIngress: "yes"`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.cli import main
from tests.stacks.conftest import catalog_doc

S = "flashfleet:stack"
Doc = dict[str, Any]
LAX_BOOLS = ["yes", 1, "on", "true", 0, "no", "1"]
LAX_NUMBERS = [True, "12", "1.5"]


def _src(d: Doc) -> Doc:
    return d["config"][S]["nodes"]["source"]


def _k8s_public(d: Doc, value: Any) -> None:
    _src(d).update(
        serviceType="LoadBalancer", loadBalancerSourceRanges=["0.0.0.0/0"], allowPublicIngress=value
    )


# field path under flashfleet:stack -> (base stack, setter)
BOOLS: dict[str, tuple[str, Callable[[Doc, Any], None]]] = {
    "nodes.source.allowPublicIngress": ("mi355x-k8s", _k8s_public),
    "nodes.source.createNamespace": ("mi355x-k8s", lambda d, v: _src(d).update(createNamespace=v)),
    "nodes.source.leaderWorkerSet": ("mi355x-k8s", lambda d, v: _src(d).update(leaderWorkerSet=v)),
    "image.derived": ("h200-lowlat", lambda d, v: d["config"][S]["image"].update(derived=v)),
}
NUMBERS: dict[str, tuple[str, Callable[[Doc, Any], None]]] = {
    "nodes.source.nodePools.mi355x.rdmaResources.rdma/x": (
        "mi355x-k8s",
        lambda d, v: _src(d)["nodePools"]["mi355x"].update(rdmaResources={"rdma/x": v}),
    ),
}


def _validate(tmp_path: Path, doc: Doc, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (tmp_path / "Pulumi.lax.yaml").write_text(yaml.safe_dump(doc))
    rc = main(["validate", "lax", "--stacks-dir", str(tmp_path)])
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.parametrize("value", LAX_BOOLS, ids=repr)
@pytest.mark.parametrize("field", sorted(BOOLS))
def test_a_switch_takes_only_true_or_false(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any
) -> None:
    base, setter = BOOLS[field]
    doc = catalog_doc(base)
    setter(doc, value)
    rc, out = _validate(tmp_path, doc, capsys)
    assert rc == 2, out
    assert f"{S}.{field}:" in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("field", sorted(BOOLS))
def test_a_real_boolean_is_still_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    base, setter = BOOLS[field]
    doc = catalog_doc(base)
    setter(doc, field.endswith("allowPublicIngress"))  # the opt-in meant, or the switch off
    rc, out = _validate(tmp_path, doc, capsys)
    assert f"{S}.{field}:" not in out, out
    assert rc == 0, out


@pytest.mark.parametrize("value", LAX_NUMBERS, ids=repr)
@pytest.mark.parametrize("field", sorted(NUMBERS))
def test_a_count_takes_only_a_whole_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any
) -> None:
    base, setter = NUMBERS[field]
    doc = catalog_doc(base)
    setter(doc, value)
    rc, out = _validate(tmp_path, doc, capsys)
    assert rc == 2, out
    assert f"{S}.{field}:" in out, out


@pytest.mark.parametrize("value", [True, "12.5", "1"], ids=repr)
def test_a_price_takes_only_a_number(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: Any) -> None:
    doc = catalog_doc("h200-lowlat")
    _src(doc).setdefault("instance", {})["priceUsdPerHour"] = value
    rc, out = _validate(tmp_path, doc, capsys)
    assert rc == 2, out
    assert f"{S}.nodes.source.instance.priceUsdPerHour:" in out, out
