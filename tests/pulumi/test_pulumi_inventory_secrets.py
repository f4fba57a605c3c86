"""The inventory each catalog stack outputs, and the HF token's path through the program."""

from __future__ import annotations

import json

import pytest
from pulumi_harness import (
    TOKEN,
    Recorder,
    Registration,
    Result,
    is_secret,
    plain_strings,
    run_program,
    token_leaks,
)

from flashfleet.bringup.host_vars import HostVars
from flashfleet.planning import load_stack
from flashfleet.planning.stack_recipe import render_stack
from flashfleet.stack import ExistingSource, list_stacks

# Stacks with hosts: an inventory and the token hand-off to Ansible (Kubernetes stacks have
# neither; test_pulumi_kubernetes.py covers them).
HOST_STACKS = [s for s in list_stacks() if load_stack(s).spec.nodes.source.kind != "kubernetes"]

# What a host is told: the HostVars model (null-valued facts may be dropped by Pulumi's wire format).
CONTRACT_VARS = set(HostVars.model_fields)
REQUIRED_VARS = {name for name, field in HostVars.model_fields.items() if field.is_required()}
_cache: dict[str, Result] = {}


def program(stack: str) -> Result:
    if stack not in _cache:
        _cache[stack] = run_program(stack)
    return _cache[stack]


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_inventory_contents(stack: str) -> None:
    r = program(stack)
    b, inv = r.bringup, r.outputs["inventory"]
    hosts = inv["all"]["hosts"]
    assert list(hosts) == [n.name for n in b.nodes] == r.outputs["nodeNames"]
    vendor = {"gb300": "nvidia", "h200": "nvidia", "mi355x": "amd"}[b.spec.hardware]
    children = inv["all"]["children"]
    for group in ("flashfleet", f"vendor_{vendor}", f"hw_{b.spec.hardware}"):
        assert set(children[group]["hosts"]) == set(hosts)
    assert ("mooncake_master" in children) == (b.spec.mooncake is not None)
    recipe = render_stack(b.spec, r.outputs["privateAddresses"])
    for i, (_name, hv) in enumerate(hosts.items()):
        assert REQUIRED_VARS <= set(hv) <= CONTRACT_VARS
        assert (hv.get("flashfleet_mooncake_layout") is not None) == (b.spec.mooncake is not None)
        assert hv["ansible_host"] == r.outputs["addresses"][i]
        assert (hv["flashfleet_stack"], hv["flashfleet_hardware"], hv["flashfleet_node_index"]) == (
            stack,
            b.spec.hardware,
            i,
        )
        assert hv["flashfleet_vendor"] == vendor
        assert hv["flashfleet_gpu_model"] in {"GB300", "H200", "MI355X"}
        assert hv["flashfleet_model"] == recipe.model
        assert hv["flashfleet_image"].startswith("lmsysorg/sglang:v0.5.23")
        procs = hv["flashfleet_processes"]
        on_node = [p for p in recipe.start_order() if p.node == i]
        assert [p["name"] for p in procs] == [p.name for p in on_node]
        for launch, proc in zip(procs, on_node, strict=True):
            # The container argv is the recipe's (minus --base-gpu-id, which a container renumbers).
            want = [
                w
                for j, w in enumerate(proc.argv)
                if not (w == "--base-gpu-id" or proc.argv[j - 1] == "--base-gpu-id")
            ]
            assert launch["argv"] == want
            assert launch["docker_run"][-len(want) :] == want


def test_ssh_user_and_addresses_of_existing_hosts() -> None:
    r = program("mi355x-agentx")
    hv = r.outputs["inventory"]["all"]["hosts"]["mi355x-agentx-node-0"]
    src = r.bringup.spec.nodes.source
    assert isinstance(src, ExistingSource)
    assert (hv["ansible_host"], hv["ansible_user"]) == (src.hosts[0].address, src.hosts[0].ssh_user)
    assert hv["flashfleet_host_memory_gb"] == 3298  # 3072 GiB
    assert 740 <= hv["flashfleet_hicache_host_gb"] <= 760
    assert hv["flashfleet_processes"][0]["devices"][:2] == ["/dev/kfd", "/dev/dri"]


def test_multi_node_rendezvous_uses_private_addresses() -> None:
    r = program("h200-l3")
    hosts = list(r.outputs["inventory"]["all"]["hosts"].values())
    master = r.outputs["privateAddresses"][0]
    for rank, hv in enumerate(hosts):
        argv = hv["flashfleet_processes"][0]["argv"]
        assert argv[argv.index("--dist-init-addr") + 1] == f"{master}:5000"
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert hv["flashfleet_mooncake_layout"]["master_server_address"] == f"{master}:50051"
    assert list(r.outputs["inventory"]["all"]["children"]["mooncake_master"]["hosts"]) == ["h200-l3-node-0"]


def test_existing_hosts_make_no_cloud_resources() -> None:
    r = program("mi355x-lowlat")
    # The component, and the playbook run that prepares and serves the hosts: nothing in a cloud.
    assert [(x.typ, x.custom) for x in r.mocks.resources] == [
        ("flashfleet:nodes:ExistingHosts", False),
        ("pulumi-python:dynamic/flashfleet:PlaybookRun", True),
    ]
    assert r.outputs["endpoint"] == "http://192.0.2.10:30000/v1"


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_playbook_run_follows_the_nodes(stack: str) -> None:
    r = program(stack)
    run = r.mocks.one("pulumi-python:dynamic/flashfleet:PlaybookRun").inputs
    assert run["playbook"] == "site.yml"
    assert run["teardownPlaybook"] == "teardown.yml"
    # One JSON string through Pulumi's wire format: the provider reads back exactly the inventory
    # the program built, its null facts and ints included (a Struct would drop and float them).
    assert isinstance(run["inventory"], str)
    assert json.loads(run["inventory"]) == r.outputs["inventory"]
    assert "bringupRunDir" in r.outputs


@pytest.mark.parametrize("stack", HOST_STACKS)
def test_hf_token_is_secret_wherever_it_goes(stack: str) -> None:
    r = program(stack)
    assert r.secret["hfToken"] is True
    assert r.outputs["hfToken"] == TOKEN
    assert token_leaks(r.mocks, r.outputs, r.secret, TOKEN) == []
    assert not any(r.secret[k] for k in r.outputs if k != "hfToken"), "only the token output is secret"
    assert TOKEN not in repr(r.outputs["inventory"])


def test_leak_detector_catches_a_plain_token() -> None:
    # The checker above must be able to fail: a resource with the token in plain text is caught,
    # the same value wrapped as a secret is not.
    r = program("h200-lowlat")
    leaky = Registration("test:leak:Leak", "leak", {"env": {"HF_TOKEN": TOKEN}}, True)
    wrapped = Registration("test:leak:Safe", "safe", {"env": {"HF_TOKEN": _secret(TOKEN)}}, True)
    r.mocks.resources += [leaky, wrapped]
    try:
        assert token_leaks(r.mocks, r.outputs, r.secret, TOKEN) == ["test:leak:Leak::leak"]
        assert token_leaks(Recorder(), {"x": f"Bearer {TOKEN}"}, {"x": False}, TOKEN) == ["output x"]
    finally:
        r.mocks.resources.remove(leaky)
        r.mocks.resources.remove(wrapped)
    assert is_secret(_secret(TOKEN))
    assert plain_strings(_secret(TOKEN)) == []


def test_no_token_no_secret_output() -> None:
    r = run_program("mi355x-lowlat", token=None)
    assert "hfToken" not in r.outputs


def _secret(value: str) -> dict[str, str]:
    from pulumi.runtime import rpc

    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}
