"""`validate: ok` means the engine's own check passes: every catalog stack's bring-up inputs, as
the program registers them under mocks, go to the provider through `python -m pulumi.dynamic`
over gRPC (the engine's wire format) and are accepted; and for every hardware swap a stack's
kind allows, `flashfleet validate` and that check agree (both ok, or both refuse the same field).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from bringup.engine import URN, ProviderHost
from pulumi.runtime import proto
from pulumi_harness import Result, run_program

from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.resolve import resolve
from flashfleet.stack import DEFAULT_STACKS_DIR, StackError, list_stacks
from flashfleet.stack.files import read_stack_file, stack_path

PLAYBOOK_RUN = "pulumi-python:dynamic/flashfleet:PlaybookRun"
CATALOG = list_stacks()
KIND = {s: load_stack(s).spec.nodes.source.kind for s in CATALOG}
# The hardware each node source can hold (MI355X is not on AWS).
HARDWARE = {
    "aws": ["gb300", "h200"],
    "existing": ["gb300", "h200", "mi355x"],
    "kubernetes": ["gb300", "h200", "mi355x"],
}


@pytest.fixture(scope="module")
def provider_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderHost]:
    host = ProviderHost(tmp_path_factory.mktemp("provider"))
    try:
        yield host
    finally:
        host.close()


def engine_check(host: ProviderHost, r: Result) -> list[str]:
    """The failures the engine would get from the provider's Check, as `field: reason` lines;
    [] when the stack registers no bring-up (Kubernetes)."""
    runs = r.mocks.of_type(PLAYBOOK_RUN)
    if not runs:
        return []
    news = host._props(runs[0].inputs)
    resp = host.stub.Check(proto.CheckRequest(urn=URN, olds=news, news=news))
    return [f"{f.property}|{f.reason}" for f in resp.failures]


def test_the_catalog_has_amd_existing_hosts_stacks() -> None:
    assert {"mi355x-agentx", "mi355x-lowlat"} <= {s for s in CATALOG if KIND[s] == "existing"}


@pytest.mark.parametrize("stack", CATALOG)
def test_every_catalog_stack_passes_the_providers_check_through_the_wire(
    stack: str, provider_host: ProviderHost
) -> None:
    # The inputs went through the SDK's serialisation to the mock monitor and go through it again
    # to the provider process: the inventory arrives as a Struct would carry it.
    r = run_program(stack)
    runs = r.mocks.of_type(PLAYBOOK_RUN)
    assert len(runs) == (0 if KIND[stack] == "kubernetes" else 1)
    assert engine_check(provider_host, r) == []


def test_the_check_refuses_in_one_short_line_naming_host_and_field(provider_host: ProviderHost) -> None:
    r = run_program("mi355x-agentx")
    run = r.mocks.one(PLAYBOOK_RUN)
    inventory = json.loads(run.inputs["inventory"])
    host = next(iter(inventory["all"]["hosts"].values()))
    del host["flashfleet_processes"][0]["gpu_request"]
    run.inputs["inventory"] = json.dumps(inventory)
    (failure,) = engine_check(provider_host, r)
    prop, reason = failure.split("|")
    assert prop == ""  # a named property makes the engine print the whole input beside it
    assert reason == (
        "all.hosts.mi355x-agentx-node-0.flashfleet_processes[0].gpu_request: missing (required by docs/contracts.md)"
    )


def _swapped(doc: dict[str, Any], hardware: str) -> dict[str, Any]:
    """The stack file with another hardware id, wherever the spec names it."""
    out = copy.deepcopy(doc)
    spec = out["config"]["flashfleet:stack"]
    old, spec["hardware"] = spec["hardware"], hardware
    src = spec["nodes"]["source"]
    for h in src.get("hosts") or []:
        h["gpus"]["model"] = hardware
    pools = src.get("nodePools")
    if isinstance(pools, dict) and old in pools:
        pools[hardware] = pools.pop(old)
    return out


SWAPS = [
    (stack, hw) for stack in CATALOG for hw in HARDWARE[KIND[stack]] if hw != load_stack(stack).spec.hardware
]


def _field(problem: str) -> str:
    return problem.split(": ", maxsplit=1)[0]  # YAML paths hold colons (flashfleet:stack...), never ": "


def _validate(name: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> str | None:
    """None when `flashfleet validate` says ok; else the field of its first problem."""
    capsys.readouterr()
    rc = main(["validate", name, "--stacks-dir", str(folder), "--format", "json"])
    (result,) = json.loads(capsys.readouterr().out)
    assert rc == (0 if result["ok"] else 2)
    return None if result["ok"] else _field(result["problems"][0])


def _engine(name: str, folder: Path, host: ProviderHost) -> str | None:
    """None when the program and the provider's check accept the stack; else the first field
    refused: by the program's resolve (as __main__ raises it) or by the provider's check."""
    sf = read_stack_file(name, folder)
    try:
        plan = resolve(sf)
    except StackError as err:
        return err.problems[0].path  # __main__ raises it as pulumi.RunError, before any resource
    failures = engine_check(host, run_program(name, plan=plan))
    return _field(failures[0].split("|", 1)[1]) if failures else None


@pytest.mark.parametrize(("stack", "hardware"), SWAPS)
def test_validate_and_the_providers_check_agree_on_a_hardware_swap(
    stack: str, hardware: str, tmp_path: Path, provider_host: ProviderHost, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text())
    stack_path(stack, tmp_path).write_text(yaml.safe_dump(_swapped(doc, hardware)))
    assert _validate(stack, tmp_path, capsys) == _engine(stack, tmp_path, provider_host)


@pytest.mark.parametrize(
    "site",
    [{"colour": "red"}, {"readiness": {"timeoutSeconds": "eight"}}, {"readiness": {"timeoutSeconds": 60}},
     {"diskCheck": {"weightsGb": 2}, "containerCli": "/usr/local/bin/docker"}],
)  # fmt: skip
@pytest.mark.parametrize("stack", ["mi355x-agentx", "h200-lowlat"])
def test_validate_and_the_providers_check_agree_on_the_site_section(
    stack: str,
    site: dict[str, Any],
    tmp_path: Path,
    provider_host: ProviderHost,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the site section reaches every run as extra variables: a key it does not have, a value of
    # the wrong type and good ones are judged alike offline and by the program and engine's check.
    doc = yaml.safe_load(stack_path(stack, DEFAULT_STACKS_DIR).read_text())
    doc["config"]["flashfleet:stack"]["site"] = site
    stack_path(stack, tmp_path).write_text(yaml.safe_dump(doc))
    found = _validate(stack, tmp_path, capsys)
    assert found == _engine(stack, tmp_path, provider_host)
    assert (found is None) == (
        site.get("colour") is None and site.get("readiness") != {"timeoutSeconds": "eight"}
    )


def test_validate_names_what_it_cannot_check_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "gb300-lowlat", "h200-lowlat", "mi355x-agentx", "--format", "json"]) == 0
    offline = {r["stack"]: r["not_checked_offline"] for r in json.loads(capsys.readouterr().out)}
    assert offline["gb300-lowlat"][0] == "the reservation or block is usable now (EC2)"
    assert offline["h200-lowlat"] == ["the nodes' addresses and SSH host keys (EC2 assigns them at up)"]
    assert offline["mi355x-agentx"] == []  # existing hosts: everything preview checks, checked


def test_validate_refuses_the_role_arguments_of_old_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(stack_path("mi355x-agentx", DEFAULT_STACKS_DIR).read_text())
    doc["config"]["flashfleet:roleVars"] = {"nvidia_driver_repo_url": "http://10.0.0.1/cuda/repos"}
    stack_path("mi355x-agentx", tmp_path).write_text(yaml.safe_dump(doc))
    assert main(["validate", "mi355x-agentx", "--stacks-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "FAIL stack mi355x-agentx: flashfleet:roleVars: no longer read: what a stack sets for the roles is"
        " flashfleet:stack.site (mirrors, package indexes, the Hub, registry mirrors; docs/security.md,"
        ' "Moving from roleVars") [rule: moved]'
    )


def test_configure_reads_the_inventory_output_as_deployed() -> None:
    # `flashfleet configure STACK` and `bench` read the stack's outputs: the JSON output keeps the
    # null launch fact a mapping loses across Pulumi's wire format (which the hand-off would refuse).
    from flashfleet import outputs
    from flashfleet.bringup.contract import check_inventory
    from flashfleet.cli.shared.stack_inventory import inventory_of
    from flashfleet.cli.shared.stackops import StackOutput

    r = run_program("mi355x-agentx")
    deployed = r.outputs[outputs.INVENTORY]
    assert any(  # the fact the wire format would drop is there to be kept
        p.get("gpu_request", "absent") is None
        for h in deployed["all"]["hosts"].values()
        for p in h["flashfleet_processes"]
    )
    outs = {
        outputs.INVENTORY: StackOutput({"all": {}}, False),  # never read: the mapping lost its nulls
        outputs.INVENTORY_JSON: StackOutput(r.outputs[outputs.INVENTORY_JSON], False),
    }
    assert inventory_of(outs) == deployed
    check_inventory(inventory_of(outs), "mi355x-agentx")
    # a stack last brought up before the JSON output: no inventory to read (the nodes are named
    # by `flashfleet up` again, or a recorded configure run)
    assert inventory_of({outputs.INVENTORY: outs[outputs.INVENTORY]}) is None
