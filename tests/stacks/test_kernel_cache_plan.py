"""`plan`'s kernel caches: the key as the stack has it, whether each bring-up starts warm on every
GPU node, through which channel, and what stays unknown; the JIT phase agrees with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flashfleet.catalog import bringup_catalog
from flashfleet.cli import main
from flashfleet.planning import load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.kernel_cache import kernel_caches
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.stack import list_stacks

Doc = dict[str, Any]


def _on_two_hosts(doc: Doc) -> None:
    stack = doc["config"]["flashfleet:stack"]
    host = {"sshUser": "ubuntu", "gpus": {"model": "h200", "count": 8}, "hostMemoryGib": 2048}
    stack["nodes"]["source"] = {
        "kind": "existing",
        "hosts": [{"address": f"192.0.2.{20 + i}", **host} for i in range(2)],
    }


def test_aws_replicas_start_cold_twice_and_the_plan_says_through_which_channel_it_could_be_warm() -> None:
    k = kernel_caches(load_stack("h200-replicas"))
    assert (k.first, k.second) == ("cold", "cold")
    assert (k.gpu, k.nodes, k.kernel_word_sets) == ("h200", 2, 1)  # both replicas build the same kernels
    assert "new instance and volume" in k.second_source
    channels = {c.name: c for c in k.channels}
    assert set(channels) == {"kept cache volume", "weights snapshot", "peer fan-out"}
    assert not any(c.applies for c in channels.values())
    assert "caches.weightsSnapshot is off" in channels["weights snapshot"].detail
    assert not k.image_pinned
    assert any("same digest" in u for u in k.unknown)  # no lock: the tag may move


def test_prefill_and_decode_build_two_sets_of_kernels() -> None:
    k = kernel_caches(load_stack("gb300-2p1d"))
    assert (k.gpu, k.nodes, k.kernel_word_sets) == ("gb300", 3, 2)


@pytest.mark.parametrize(("keep", "second"), [(True, "warm"), (False, "cold")])
def test_kept_hosts_start_warm_on_every_node_only_while_their_cache_volume_is_kept(
    write_stack, keep: bool, second: str
) -> None:
    def change(doc: Doc) -> None:
        _on_two_hosts(doc)
        doc["config"]["flashfleet:stack"]["teardown"] = {"keepCaches": keep}

    plan = load_stack("broken", write_stack("h200-replicas", change))
    t = time_to_first_token(plan, critical_path(plan))
    assert t.kernels is not None
    assert t.kernels.second == second
    assert next(c for c in t.kernels.channels if c.name == "kept cache volume").applies is keep
    jit = next(p for p in t.phases if p.name == "jit")
    cat = bringup_catalog()["startup"]["jit"]["nvidia"]
    assert jit.second_s == (cat["cached_s"] if keep else cat["first_s"])  # one decision, two views
    assert jit.second_source == t.kernels.second_source


def test_every_catalog_stacks_jit_phase_agrees_with_its_kernel_caches() -> None:
    for stack in list_stacks():
        plan = load_stack(stack)
        t = time_to_first_token(plan, critical_path(plan))
        jit = next(p for p in t.phases if p.name == "jit")
        assert t.kernels is not None
        warm = t.kernels.second == "warm"
        cached = bringup_catalog()["startup"]["jit"][plan.vendor].get("cached_s")
        assert jit.second_s == (cached if warm else jit.first_s), stack


def test_plan_prints_the_kernel_caches_of_both_catalog_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    for stack in ("h200-replicas", "gb300-2p1d"):
        assert main(["plan", stack]) == 0
        out = capsys.readouterr().out
        assert "kernel caches: one folder per image (" in out
        assert "second bring-up cold: built again" in out
        assert "channel peer fan-out: no (not yet" in out
        assert "unknown: how much of the JIT phase" in out
    assert main(["plan", "h200-replicas", "--format", "json"]) == 0
    kernels = json.loads(capsys.readouterr().out)["time_to_first_token"]["kernels"]
    assert kernels["second"] == "cold"
    assert kernels["gpu"] == "h200"
