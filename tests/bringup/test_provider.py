"""The playbook resource's provider, through the engine's own round trip (dill-pickled, base64,
unpickled and served by `python -m pulumi.dynamic` in another process), running real playbooks
with ansible-runner against this machine (`ansible_connection: local`) and an unreachable node
(a loopback port nothing listens on)."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dill
import grpc
import pytest
from pulumi.runtime import proto, rpc

from flashfleet.bringup import provider as provider_module
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.project import Project
from flashfleet.bringup.provider import PlaybookRunProvider, stored_path

from .conftest import resource_inputs
from .engine import URN, ProviderHost, serialized_provider
from .inventories import PROJECT, TOKEN, inventory, local_host, unreachable_host


def _runs(path: Path) -> int:
    log = path / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_the_provider_unpickles_in_a_fresh_process_with_no_captured_state() -> None:
    pickled = base64.b64decode(serialized_provider())
    assert TOKEN.encode() not in pickled
    code = (
        "import base64,dill,sys; p=dill.loads(base64.b64decode(sys.stdin.read()));"
        "print(type(p).__module__, type(p).__name__, sorted(vars(p)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=serialized_provider(), capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["flashfleet.bringup.provider", "PlaybookRunProvider", "[]"]


def test_diff_after_an_in_process_dill_round_trip(tmp_path: Path, two_local_nodes: dict[str, Any]) -> None:
    provider = dill.loads(base64.b64decode(serialized_provider()))
    assert isinstance(provider, PlaybookRunProvider)
    news = resource_inputs(tmp_path, two_local_nodes)
    olds = {"inventoryHash": "0" * 64, "treeHash": news["treeHash"], "playbook": "site.yml"}
    assert provider.diff("id", olds, news).changes is True


def test_create_runs_the_playbook_and_keeps_the_token_out_of_state_and_files(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    id_, outs = provider_host.create(resource_inputs(tmp_path, two_local_nodes))

    assert id_.startswith("playbooks-")
    for node in ("n0", "n1"):
        deployed = json.loads((tmp_path / node / "deployed.json").read_text())
        # numbers stay ints and null facts stay defined, across Pulumi's wire format
        assert (deployed["gpus"], deployed["draft"]) == (8, None)
        assert _runs(tmp_path / node) == 1
        # the token reached the roles (through the environment only)
        assert (tmp_path / node / "token.sha256").read_text().strip() == hashlib.sha256(
            TOKEN.encode()
        ).hexdigest()
    run_dir = Path(outs["runDir"])
    assert {"events.jsonl", "summary.txt", "progress.log", "inventory.json", "timeline.png"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert outs["changed"] == 8
    assert "hfToken" not in outs
    assert TOKEN not in json.dumps({k: v for k, v in outs.items() if k != "__provider"})
    assert all(TOKEN.encode() not in p.read_bytes() for p in _files_under(tmp_path / "runs"))
    assert TOKEN not in provider_host.stderr
    assert "[node-0] marker: done" in provider_host.stderr  # progress reaches the engine's diagnostics


def test_update_runs_again_only_when_the_recipe_or_the_roles_change(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    inputs = resource_inputs(tmp_path, two_local_nodes)
    id_, outs = provider_host.create(inputs)

    assert provider_host.diff(id_, outs, inputs) is False
    moved = copy.deepcopy(two_local_nodes)
    moved["all"]["hosts"]["node-0"]["ansible_ssh_common_args"] = "-o ConnectTimeout=9"
    reconnected = resource_inputs(tmp_path, moved)
    assert provider_host.diff(id_, outs, reconnected) is False  # how to reach a node is not what runs on it
    assert provider_host.diff(id_, outs, {**inputs, "hfToken": "hf_another"}) is False

    new_argv = ["sglang", "serve", "--model-path", "zai-org/GLM-5.3-Flash", "--tp-size", "8"]
    recipe_changed = resource_inputs(tmp_path, inventory("t1", {
        "node-0": (local_host(), tmp_path / "n0"), "node-1": (local_host(), tmp_path / "n1")}, argv=new_argv))  # fmt: skip
    assert provider_host.diff(id_, outs, recipe_changed) is True
    new_outs = provider_host.update(id_, outs, recipe_changed)

    assert json.loads((tmp_path / "n0" / "deployed.json").read_text())["argv"] == [new_argv]
    assert _runs(tmp_path / "n0") == 2
    assert new_outs["runDir"] != outs["runDir"]
    assert provider_host.diff(id_, new_outs, recipe_changed) is False

    edited = tmp_path / "project"
    shutil.copytree(PROJECT, edited)
    tasks = edited / "roles" / "marker" / "tasks" / "main.yml"
    tasks.write_text(tasks.read_text() + "\n# a role edit\n")
    roles_changed = {**recipe_changed, "projectDir": str(edited), "treeHash": Project(edited).tree_hash()}
    assert provider_host.diff(id_, new_outs, roles_changed) is True


def test_a_failed_create_raises_the_summary_and_creates_nothing(
    tmp_path: Path, provider_host: ProviderHost
) -> None:
    inv = inventory(
        "t1", {"node-0": (local_host(), tmp_path / "n0"), "dead-0": (unreachable_host(), tmp_path / "d")}
    )
    with pytest.raises(grpc.RpcError) as err:
        provider_host.create(resource_inputs(tmp_path, inv))
    assert "PlaybookFailed" in str(err.value)
    assert "dead-0" in str(err.value)
    assert TOKEN not in str(err.value)


def test_delete_tears_down_reachable_hosts_and_warns_about_an_unreachable_one(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    id_, outs = provider_host.create(resource_inputs(tmp_path, two_local_nodes))
    # node-1 died after the bring-up: its address now answers nothing
    gone = json.loads(outs["inventory"])
    gone["all"]["hosts"]["node-1"].update(unreachable_host())
    outs["inventory"] = json.dumps(gone)

    provider_host.delete(id_, outs)  # does not raise: the destroy goes on

    assert not (tmp_path / "n0" / "deployed.json").exists()
    assert (tmp_path / "n1" / "deployed.json").exists()  # unreachable: left as it was
    assert "warning: teardown: unreachable, left as they are: node-1" in provider_host.stderr


def test_delete_succeeds_with_a_warning_when_every_host_is_gone(
    tmp_path: Path, provider_host: ProviderHost
) -> None:
    inv = inventory("t1", {"node-0": (unreachable_host(), tmp_path / "n0")})
    outs = {**resource_inputs(tmp_path, inv), "inventoryHash": "x"}
    provider_host.delete("playbooks-gone", outs)
    warnings = [ln for ln in provider_host.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1
    assert "unreachable, left as they are: node-0" in warnings[0]


def test_delete_fails_naming_the_host_a_teardown_did_not_finish_on(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    # Issue 14: delete() swallowed every exception, so the state forgot hosts that still ran.
    id_, outs = provider_host.create(resource_inputs(tmp_path, two_local_nodes))
    (tmp_path / "n1" / "fail-teardown").write_text("")
    with pytest.raises(grpc.RpcError) as err:
        provider_host.delete(id_, outs)
    assert "teardown did not finish on node-1" in str(err.value)
    assert "node-0" not in str(err.value).split("\n")[0]
    assert not (tmp_path / "n0" / "deployed.json").exists()  # the others were torn down
    (tmp_path / "n1" / "fail-teardown").unlink()
    provider_host.delete(id_, outs)  # the next destroy converges
    assert not (tmp_path / "n1" / "deployed.json").exists()


def test_delete_fails_when_the_teardown_playbook_is_missing(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    id_, outs = provider_host.create(resource_inputs(tmp_path, two_local_nodes))
    with pytest.raises(grpc.RpcError) as err:
        provider_host.delete(id_, {**outs, "teardownPlaybook": "nope.yml"})
    assert "nope.yml" in str(err.value)
    assert (tmp_path / "n0" / "deployed.json").exists()  # nothing pretended to be torn down


def test_state_stores_the_project_relative_and_a_gone_checkout_still_tears_down(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    # Issue 14: the absolute project path of another checkout skipped the teardown.
    id_, outs = provider_host.create(resource_inputs(tmp_path, two_local_nodes))
    assert not Path(outs["projectDir"]).is_absolute()
    assert outs["projectDir"] == "tests/bringup/project"
    moved = {**outs, "projectDir": str(tmp_path / "other-checkout" / "tests/bringup/project")}
    provider_host.delete(id_, moved)
    assert "is gone; using the playbooks of" in provider_host.stderr
    # this program's own teardown.yml ran (its roles find nothing of theirs on this machine)
    assert "teardown done" in provider_host.stderr


def test_check_refuses_a_broken_inventory_naming_the_field(
    tmp_path: Path, provider_host: ProviderHost, two_local_nodes: dict[str, Any]
) -> None:
    two_local_nodes["all"]["hosts"]["node-1"]["flashfleet_vendor"] = "intel"
    news = provider_host._props(resource_inputs(tmp_path, two_local_nodes))
    resp = provider_host.stub.Check(proto.CheckRequest(urn=URN, olds=news, news=news))
    # No property named: the engine would print the whole inventory beside the reason.
    assert [(f.property, f.reason.split(":")[0]) for f in resp.failures] == [
        ("", "all.hosts.node-1.flashfleet_vendor")
    ]
    assert "\n" not in resp.failures[0].reason
    assert len(resp.failures[0].reason) < 200


def test_check_finds_the_stored_project_from_the_pulumi_projects_directory(
    tmp_path: Path, two_local_nodes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine runs the provider in the Pulumi project's directory, which need not be this
    # repository: the stored (relative) project is this program's, not the working directory's.
    inputs = resource_inputs(tmp_path, two_local_nodes, extravars={"marker_draft": "x"})
    inputs["projectDir"] = stored_path(PROJECT)  # as attach() stores it
    assert not Path(inputs["projectDir"]).is_absolute()
    monkeypatch.chdir(tmp_path)
    assert PlaybookRunProvider().check({}, inputs).failures == []


def test_check_refuses_a_role_argument_the_role_does_not_have(
    tmp_path: Path, two_local_nodes: dict[str, Any]
) -> None:
    provider = PlaybookRunProvider()
    good = resource_inputs(tmp_path, two_local_nodes, extravars={"marker_draft": "x"})
    assert provider.check({}, good).failures == []
    bad = resource_inputs(tmp_path, two_local_nodes, extravars={"marker_colour": "red"})
    failures = provider.check({}, bad).failures
    # `configure -e`'s rule, naming the extra variable
    assert [f.property for f in failures] == ["extravars"]
    assert failures[0].reason.startswith("extravars.marker_colour: ")
    assert failures[0].reason.endswith("[rule: unknown-argument]")


def _as_the_struct_left_it(value: Any) -> Any:
    """A value after Pulumi's protobuf Struct: what the state of a provider before the JSON
    inputs holds (nulls dropped at any depth, every number a float)."""
    return rpc.deserialize_properties(asyncio.run(rpc.serialize_properties({"v": value}, {})))["v"]


def _result(tmp_path: Path) -> RunResult:
    return RunResult("successful", 0, {"changed": {"node-0": 1}}, tmp_path / "run")


def test_a_state_of_mappings_is_refused_in_one_line_naming_the_input(
    tmp_path: Path, two_local_nodes: dict[str, Any]
) -> None:
    # A provider before the JSON inputs stored the inventory as a Struct (nulls dropped, ints as
    # floats): nothing decodes it back any more, and the delete says what to do instead.
    olds = {
        **resource_inputs(tmp_path, two_local_nodes),
        "inventory": _as_the_struct_left_it(two_local_nodes),
    }
    with pytest.raises(BringupInputError) as err:
        provider_module.RunInputs.from_props(olds)
    assert str(err.value).startswith("inventory: a dict, not a JSON string: ")
    assert "run `pulumi up` once" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_new_state_keeps_nulls_and_ints_for_the_teardown(
    tmp_path: Path, two_local_nodes: dict[str, Any]
) -> None:
    # The outputs hold the inputs as JSON too: a delete reads the inventory exactly as deployed.
    two_local_nodes["all"]["hosts"]["node-0"]["flashfleet_processes"][0]["gpu_request"] = None
    inputs = provider_module.RunInputs.from_props(resource_inputs(tmp_path, two_local_nodes))
    stored = provider_module.RunInputs.from_props(_as_the_struct_left_it(inputs.outputs(_result(tmp_path))))
    assert stored.inventory == two_local_nodes
