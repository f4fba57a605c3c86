"""The composition root (`__main__.py`) under mocks: config in, validation first, outputs out."""

from __future__ import annotations

import json
import runpy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi_harness import TOKEN, Recorder, plain_strings

from flashfleet.stack import DEFAULT_STACKS_DIR, StackError

MAIN = Path(__file__).resolve().parents[2] / "__main__.py"


def run_main(
    stack: str, spec: dict[str, Any], region: str | None = "us-east-2", mocks: Recorder | None = None
) -> Recorder:
    config = {"flashfleet:stack": json.dumps(spec), "flashfleet:hfToken": TOKEN}
    if region:
        config["aws:region"] = region
    pulumi.runtime.set_all_config(config, secret_keys=["flashfleet:hfToken"])
    mocks = mocks or Recorder()
    pulumi.runtime.set_mocks(mocks, project="flashfleet", stack=stack, preview=False)

    @pulumi.runtime.test
    def program() -> Any:
        runpy.run_path(str(MAIN), run_name="__main__")
        return None

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({})
    return mocks


def catalog_spec(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((DEFAULT_STACKS_DIR / f"Pulumi.{name}.yaml").read_text())
    return dict(doc["config"]["flashfleet:stack"])


def test_main_builds_the_stack_from_config() -> None:
    mocks = run_main("h200-lowlat", catalog_spec("h200-lowlat"))
    assert mocks.resources, "the program registered resources"
    assert len(mocks.of_type("aws:ec2/instance:Instance")) == 1
    assert mocks.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["instanceType"] == "p5en.48xlarge"


def refused(info: pytest.ExceptionInfo[pulumi.RunError]) -> StackError:
    """The program refuses a stack as a RunError (Pulumi prints it without a traceback), with
    every problem of the StackError behind it in its message."""
    problem = info.value.__context__
    assert isinstance(problem, StackError), problem
    assert str(info.value) == str(problem)
    return problem


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda s: s.pop("ttl"), "flashfleet:stack.ttl"),
        (lambda s: s.update(options={"speculative": "eagle"}), "flashfleet:stack.options.speculative"),
        (
            lambda s: s["nodes"]["source"].update(allowedCidrs=["0.0.0.0/0"]),
            "flashfleet:stack.nodes.source.allowedCidrs",
        ),
        (  # issue 14: two halves opened ports 22 and 30000 to all of IPv4 under mocks
            lambda s: s["nodes"]["source"].update(allowedCidrs=["0.0.0.0/1", "128.0.0.0/1"]),
            "flashfleet:stack.nodes.source.allowedCidrs",
        ),
    ],
)
def test_broken_config_registers_nothing(change: Any, path: str) -> None:
    spec = catalog_spec("gb300-pd")
    change(spec)
    mocks = Recorder()
    with pytest.raises(pulumi.RunError) as info:
        run_main("gb300-pd", spec, mocks=mocks)
    assert path in refused(info).paths()
    # Validation runs before the first component: not even the component was registered.
    assert mocks.resources == []


def test_aws_stack_without_region_is_refused_before_resources() -> None:
    mocks = Recorder()
    with pytest.raises(pulumi.RunError, match="aws:region") as info:
        run_main("h200-lowlat", catalog_spec("h200-lowlat"), region=None, mocks=mocks)
    assert refused(info).paths() == ["aws:region"]
    assert mocks.resources == []


def test_main_builds_a_kubernetes_stack_without_a_region() -> None:
    mocks = run_main("mi355x-k8s", catalog_spec("mi355x-k8s"), region=None)
    assert len(mocks.of_type("flashfleet:nodes:KubernetesCluster")) == 1
    assert len(mocks.of_type("kubernetes:apps/v1:Deployment")) == 1
    assert not [r for r in mocks.resources if r.typ.startswith("aws:")]
    assert not [r.name for r in mocks.resources if any(TOKEN in s for s in plain_strings(r.inputs))]


def test_kubernetes_stack_with_the_derived_image_registers_nothing() -> None:
    spec = catalog_spec("mi355x-k8s")
    spec["image"]["derived"] = True
    mocks = Recorder()
    with pytest.raises(pulumi.RunError) as info:
        run_main("mi355x-k8s", spec, region=None, mocks=mocks)
    assert refused(info).paths() == ["flashfleet:stack.image.derived"]
    assert mocks.resources == []


@pytest.mark.parametrize("annotations", [None, {"flashfleet.dev/created-by": "another-stack"}])
def test_a_namespace_flashfleet_did_not_create_is_refused_before_any_resource(
    monkeypatch: pytest.MonkeyPatch, annotations: dict[str, str] | None
) -> None:
    """createNamespace: true on a namespace that is there already: the provider's server-side
    apply would take it over and `down` delete it. The program reads it first and refuses."""
    asked: list[tuple[str | None, str]] = []

    def existing(context: str | None, namespace: str) -> dict[str, Any]:
        asked.append((context, namespace))
        return {"metadata": {"name": namespace, **({"annotations": annotations} if annotations else {})}}

    monkeypatch.setattr("flashfleet.k8s.namespace_owner.read_namespace", existing)
    spec = catalog_spec("mi355x-k8s")
    source = spec["nodes"]["source"]
    mocks = Recorder()
    with pytest.raises(pulumi.RunError) as info:
        run_main("mi355x-k8s", spec, region=None, mocks=mocks)
    assert asked == [(source["context"], source["namespace"])]
    message = str(info.value)
    assert message.startswith(f"flashfleet:stack.nodes.source.namespace: namespace {source['namespace']} ")
    assert "[rule: namespace-not-ours]" in message
    who = "flashfleet did not create it" if annotations is None else "stack another-stack created it"
    assert who in message
    assert mocks.resources == []  # nothing registered: no namespace adopted, no object in it


def test_the_namespace_this_stack_created_is_taken_over_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one `down` kept (teardown.keepCaches) carries this stack's mark."""
    spec = catalog_spec("mi355x-k8s")
    mark = {"flashfleet.dev/created-by": "mi355x-k8s"}
    monkeypatch.setattr(
        "flashfleet.k8s.namespace_owner.read_namespace",
        lambda context, namespace: {"metadata": {"name": namespace, "annotations": mark}},
    )
    mocks = run_main("mi355x-k8s", spec, region=None)
    namespace = mocks.one("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["annotations"] == mark


def test_a_namespace_the_stack_does_not_create_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(context: str | None, namespace: str) -> None:
        raise AssertionError("read")

    monkeypatch.setattr("flashfleet.k8s.namespace_owner.read_namespace", unreadable)
    spec = catalog_spec("mi355x-k8s")
    spec["nodes"]["source"]["createNamespace"] = False
    mocks = run_main("mi355x-k8s", spec, region=None)
    assert mocks.of_type("kubernetes:core/v1:Namespace") == []


def test_ipv6_cidrs_become_ipv6_rules() -> None:
    spec = catalog_spec("h200-lowlat")
    spec["nodes"]["source"]["allowedCidrs"] = ["203.0.113.0/24", "2001:db8::/48"]
    mocks = run_main("h200-lowlat", spec)
    rules = {
        (x.inputs.get("cidrIpv4"), x.inputs.get("cidrIpv6"), int(x.inputs["fromPort"]))
        for x in mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if "referencedSecurityGroupId" not in x.inputs
    }
    cidrs = (("203.0.113.0/24", None), (None, "2001:db8::/48"))
    assert rules == {(c4, c6, port) for c4, c6 in cidrs for port in (22, 30000)}


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("flashfleet:hfToken", "failed", "secret-not-event-word"),
        ("flashfleet:apiKey", "true", "secret-not-event-word"),
        ("flashfleet:apiKey", "Zq9v4T2m", "secret-min-length"),
    ],
)
def test_a_secret_the_runs_cannot_hide_registers_nothing(key: str, value: str, rule: str) -> None:
    mocks = Recorder()
    config = {"flashfleet:stack": json.dumps(catalog_spec("h200-lowlat")), "flashfleet:hfToken": TOKEN,
              "aws:region": "us-east-2", key: value}  # fmt: skip
    pulumi.runtime.set_all_config(config, secret_keys=["flashfleet:hfToken", "flashfleet:apiKey"])
    pulumi.runtime.set_mocks(mocks, project="flashfleet", stack="h200-lowlat", preview=False)

    @pulumi.runtime.test
    def program() -> Any:
        runpy.run_path(str(MAIN), run_name="__main__")

    try:
        with pytest.raises(pulumi.RunError) as info:
            program()
    finally:
        pulumi.runtime.set_all_config({})
    assert str(info.value).startswith(f"stack h200-lowlat: {key}: ")
    assert str(info.value).endswith(f"[rule: {rule}]")
    assert value not in str(info.value).removeprefix(f"stack h200-lowlat: {key}: ")
    assert mocks.resources == []


def test_the_program_says_what_an_update_does_before_pulumi_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pulumi up` run by hand says it as `flashfleet up` does: a PD group's update is an outage."""
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda msg, *a, **k: said.append(msg))
    from flashfleet.capacity import reservation

    # a bought block, as the pre-flight would find it (no EC2 under mocks)
    monkeypatch.setattr(reservation, "check_reservation_usable", lambda plan: None)
    monkeypatch.setattr(reservation, "block_end", lambda _: datetime.now(UTC) + timedelta(hours=8))
    run_main("gb300-2p1d", catalog_spec("gb300-2p1d"))
    from flashfleet.cli.up import restart_text
    from flashfleet.planning import load_stack
    from flashfleet.planning.plan_view import plan_data

    shown = [m for m in said if m.startswith("update: ")]
    assert shown == [f"update: {restart_text(plan_data(load_stack('gb300-2p1d')))}"]
    assert "cuts the whole PD group" in shown[0]
