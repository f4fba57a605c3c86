"""`attach()` as the Pulumi program calls it, under Pulumi's mocks (the provider itself is
tested through the engine's round trip in test_provider.py: mocks never call it)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.bringup.provider import attach

from .inventories import PROJECT, TOKEN

REGISTERED: list[pulumi.runtime.MockResourceArgs] = []


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        REGISTERED.append(args)
        return f"{args.name}-id", {**args.inputs, "runDir": "/runs/t1/x", "changed": 3}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


@pytest.fixture(autouse=True)
def _mocks() -> None:
    REGISTERED.clear()
    pulumi.runtime.set_mocks(_Mocks(), preview=False)


@pulumi.runtime.test
def test_attach_registers_the_playbook_run_after_the_inventory(two_local_nodes: dict[str, Any]) -> Any:
    run = attach("bringup", pulumi.Output.from_input(two_local_nodes), pulumi.Output.from_input(TOKEN),
                 project_dir=PROJECT)  # fmt: skip

    def check(values: list[Any]) -> None:
        run_dir, urn = values
        assert run_dir == "/runs/t1/x"
        (args,) = REGISTERED
        assert args.typ == "pulumi-python:dynamic/flashfleet:PlaybookRun"
        assert urn.endswith("::bringup")
        assert args.inputs["playbook"] == "site.yml"
        assert args.inputs["teardownPlaybook"] == "teardown.yml"
        assert args.inputs["projectDir"] == "tests/bringup/project"  # relative: any checkout finds it
        assert args.inputs["treeHash"] == Project(PROJECT).tree_hash() != DEFAULT_PROJECT.tree_hash()
        hosts = json.loads(args.inputs["inventory"])["all"]["hosts"]
        assert sorted(hosts) == ["node-0", "node-1"]
        assert (
            hosts["node-1"]["flashfleet_model_cache_dir"]
            == two_local_nodes["all"]["hosts"]["node-1"]["flashfleet_model_cache_dir"]
        )
        assert "__provider" in args.inputs

    return pulumi.Output.all(run.runDir, run.urn).apply(check)


@pulumi.runtime.test
def test_the_token_input_is_secret(two_local_nodes: dict[str, Any]) -> Any:
    run = attach("bringup", two_local_nodes, pulumi.Output.from_input(TOKEN), project_dir=PROJECT)
    token: pulumi.Output[str] = getattr(run, "hfToken")  # noqa: B009 (an attribute only dynamic resources have)

    def check(secret: bool) -> None:
        assert secret is True

    return pulumi.Output.from_input(token.is_secret()).apply(check)
