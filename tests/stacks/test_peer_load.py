"""options.peer_load: each replica after the first loads its weights from another replica
(SGLang's remote-instance weight loader) instead of from its disk: with `on` all of them read
from the first over Mooncake's TransferEngine (the first keeps serving), with `nccl` each loads
from the one before it (an NCCL seed sends to one loader at a time, so the chain orders the
loads). The render names every setting the loader needs (SGLang quietly loads from disk when one
is missing), a peer's node downloads no weight file, and what SGLang cannot do is refused naming
the option. On real test hosts: tests/serve/test_cluster_hosts.py and
tests/roles/test_model_weights.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main
from flashfleet.inventory import WEIGHT_FILES, build_inventory
from flashfleet.planning import load_stack
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.time_to_first_token import time_to_first_token
from flashfleet.recipes import RecipeError, render
from flashfleet.stack import StackError

S = "flashfleet:stack"
Doc = dict[str, Any]
WriteStack = Callable[[str, Callable[[Doc], None]], Path]
ADDRS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
LOADER = "--remote-instance-weight-loader-"


def flags(argv: tuple[str, ...]) -> dict[str, str]:
    words = [*argv, ""]
    return {
        w: "" if words[i + 1].startswith("--") else words[i + 1]
        for i, w in enumerate(argv)
        if w.startswith((LOADER, "--load-format", "--engine-info-bootstrap-port"))
    }


def test_each_replica_after_the_first_reads_from_the_first_over_the_transfer_engine() -> None:
    recipe = render("h200", "high-throughput", "unified", {"replicas": 3, "peer_load": "on"}, addresses=ADDRS)
    procs = {p.name: p for p in recipe.processes}
    r0, r1, r2 = procs["replica-0"], procs["replica-1"], procs["replica-2"]
    # the seed loads from disk, registers its weights with its engine and publishes each rank's
    # session on its bootstrap server
    assert flags(r0.argv) == {
        f"{LOADER}start-seed-via-transfer-engine": "",
        "--engine-info-bootstrap-port": "6789",
    }
    assert r0.load_from == ""
    for proc in (r1, r2):  # both from the first: one-sided reads, no send group, no chain
        assert flags(proc.argv) == {
            "--load-format": "remote_instance",
            f"{LOADER}seed-instance-ip": "10.0.0.1",
            f"{LOADER}seed-instance-service-port": "31000",  # the seed replica's own port
            f"{LOADER}backend": "transfer_engine",
        }
        assert proc.load_from == "http://10.0.0.1:31000"
        assert proc.argv[-4:] == ("--host", "0.0.0.0", "--port", "31000")
    assert recipe.badge == "Not Verified"
    assert "peer_load" in recipe.badge_source
    # DP attention is no limit here: the sessions are published per TP rank
    dp = render("h200", "high-throughput", "unified", {"replicas": 2, "peer_load": "on", "dp_attention": "on",
                                                       "speculative": "off"})  # fmt: skip
    assert flags(dp.processes[1].argv)[f"{LOADER}backend"] == "transfer_engine"


def test_over_nccl_each_replica_after_the_first_loads_from_the_one_before_it() -> None:
    recipe = render(
        "h200", "high-throughput", "unified", {"replicas": 3, "peer_load": "nccl"}, addresses=ADDRS
    )
    procs = {p.name: p for p in recipe.processes}
    r0, r1, r2 = procs["replica-0"], procs["replica-1"], procs["replica-2"]
    assert flags(r0.argv) == {}  # the seed of the chain loads from disk
    assert r0.load_from == ""
    for proc, seed in ((r1, "10.0.0.1"), (r2, "10.0.0.2")):
        assert flags(proc.argv) == {
            "--load-format": "remote_instance",
            f"{LOADER}seed-instance-ip": seed,
            f"{LOADER}seed-instance-service-port": "31000",  # the seed replica's own port
            f"{LOADER}send-weights-group-ports": "[31600,31601,31602,31603,31604,31605,31606,31607]",
            f"{LOADER}backend": "nccl",
        }
        assert proc.load_from == f"http://{seed}:31000"
        assert proc.argv[-4:] == ("--host", "0.0.0.0", "--port", "31000")
    # one port a TP rank: SGLang's seed asserts exactly tp of them
    tp2 = render("h200", "high-throughput", "unified", {"replicas": 2, "peer_load": "nccl", "tp": 2})
    assert flags(tp2.processes[1].argv)[f"{LOADER}send-weights-group-ports"] == "[31600,31601]"
    # not in the seed's commands: Not Verified, naming the option
    assert recipe.badge == "Not Verified"
    assert "peer_load" in recipe.badge_source
    assert render("h200", "high-throughput", "unified", {"replicas": 3}).processes[1].load_from == ""


@pytest.mark.parametrize(
    ("topology", "overrides", "fragment"),
    [
        ("unified", {"peer_load": "on"}, "needs replicas of 2 or more"),
        ("unified", {"peer_load": "on", "replicas": 2, "nodes": 2, "tp": 16}, "replicas of one node each"),
        (
            "unified",
            {"peer_load": "nccl", "replicas": 2, "dp_attention": "on", "speculative": "off"},
            "dp_size 1",
        ),
        ("prefill-cp", {"peer_load": "on", "replicas": 2}, "unified topology"),
        ("unified", {"peer_load": "on", "replicas": 2, "speculative": "eagle"}, "set speculative=off"),
    ],
)
def test_what_the_loader_cannot_do_is_refused_naming_the_option(
    topology: str, overrides: dict[str, Any], fragment: str
) -> None:
    hardware = "gb300" if topology == "prefill-cp" else "h200"
    strategy = "low-latency" if topology == "prefill-cp" else "high-throughput"
    with pytest.raises(RecipeError) as info:
        render(hardware, strategy, topology, overrides)
    assert (info.value.field, info.value.rule) == ("peer_load", "peer-load-replicas")
    assert fragment in info.value.message


def test_the_loader_flags_are_the_options_own() -> None:
    with pytest.raises(RecipeError) as info:
        render("h200", "high-throughput", "unified", {"replicas": 2, "extra_args": ["--load-format", "auto"]})
    assert info.value.rule == "extra-args-typed"
    assert "peer_load" in info.value.message


def _peer_stack(doc: Doc) -> None:
    doc["config"][S]["options"] = {"peer_load": "nccl"}  # AWS: the TransferEngine's RDMA is not there


def _peer_on(doc: Doc) -> None:
    doc["config"][S]["options"] = {"peer_load": "on"}


def test_on_aws_nodes_the_transfer_engine_is_refused_and_nccl_named(write_stack: WriteStack) -> None:
    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("h200-replicas", _peer_on))
    [problem] = info.value.problems
    assert (problem.path, problem.rule) == (f"{S}.options.peer_load", "peer-load-fabric")
    assert "set nccl" in problem.message
    # existing hosts (InfiniBand or RoCE verbs) take it
    plan = load_stack("broken", write_stack("mi355x-replicas", _peer_on))
    assert plan.recipe.options.peer_load == "on"


def test_a_peers_node_downloads_everything_but_the_weight_files(write_stack: WriteStack) -> None:
    plan = load_stack("broken", write_stack("h200-replicas", _peer_stack))
    inventory = build_inventory(plan, ["10.0.0.1", "10.0.0.2"], ["10.0.0.1", "10.0.0.2"])
    hosts = inventory["all"]["hosts"]
    by_index = {h["flashfleet_node_index"]: h for h in hosts.values()}
    assert by_index[0]["flashfleet_weights_exclude"] == []  # the seed downloads the checkpoint
    assert by_index[1]["flashfleet_weights_exclude"] == list(WEIGHT_FILES)
    assert "*.safetensors" in WEIGHT_FILES
    [replica1] = by_index[1]["flashfleet_processes"]
    assert replica1["load_from"] == "http://10.0.0.1:31000"  # its unit waits for it


def test_plan_models_the_chained_loads_as_unknown_and_shows_the_lever(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    off = load_stack("h200-replicas")
    t = time_to_first_token(off, critical_path(off))
    [lever] = [lever for lever in t.levers if lever.name == "peer_load"]
    assert (lever.setting, lever.other, lever.where) == ("off", "nccl", "recipe option")  # AWS nodes
    assert lever.badge.startswith("Not Verified")
    assert "peers" in lever.first.unknown
    assert t.first.unknown == lever.first.unknown[:-1]
    on = load_stack("broken", write_stack("h200-replicas", _peer_stack))
    t_on = time_to_first_token(on, critical_path(on))
    peers = t_on.phases[-1]
    assert (peers.name, peers.first_s, peers.basis) == ("peers", None, None)
    assert "1 replica(s) after the first, one after another" in peers.source
    assert t_on.first.total_s is None
    assert "peers" in t_on.first.unknown
    assert t_on.first.known_s == t.first.known_s  # the first replica's own path, as without it
    # a stack of one server has no lever to show
    single = load_stack("h200-lowlat")
    assert "peer_load" not in [
        lever.name for lever in time_to_first_token(single, critical_path(single)).levers
    ]
    assert main(["plan", "broken", "--stacks-dir", str(write_stack("h200-replicas", _peer_stack)),
                 "--format", "json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert "peers" in out["time_to_first_token"]["first"]["unknown"]
    # over the TransferEngine (existing hosts) the loads are side by side, from the first replica
    te = load_stack("broken", write_stack("mi355x-replicas", _peer_on))
    te_peers = time_to_first_token(te, critical_path(te)).phases[-1]
    assert "1 replica(s) after the first, all at once" in te_peers.source
    [te_lever] = [
        lever for lever in time_to_first_token(te, critical_path(te)).levers if lever.name == "peer_load"
    ]
    assert (te_lever.setting, te_lever.other) == ("on", "off")


def test_kubernetes_stacks_refuse_it_before_anything_is_created(
    write_stack: WriteStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = write_stack("mi355x-k8s-replicas", _peer_stack)
    assert main(["validate", "broken", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{S}.options.peer_load" in err[0]
    assert "not offered on Kubernetes" in err[0]


def test_the_seeds_send_group_ports_are_taken_like_any_other(write_stack: WriteStack) -> None:
    def change(doc: Doc) -> None:
        s = doc["config"][S]
        s["options"] = {"peer_load": "nccl", "hicache": "l1l2l3", "hicache_size": 100}
        s["mooncake"] = {"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 64, "metricsPort": 31603}

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("h200-replicas", change))
    [problem] = [p for p in info.value.problems if p.rule == "port-collision"]
    assert problem.path == f"{S}.mooncake.metricsPort"
    assert "replica-1's seed --remote-instance-weight-loader-send-weights-group-ports" in problem.message


def test_the_seeds_bootstrap_port_is_taken_like_any_other(write_stack: WriteStack) -> None:
    def change(doc: Doc) -> None:
        s = doc["config"][S]
        s["options"] = {"peer_load": "on", "hicache": "l1l2l3", "hicache_size": 100}
        s["mooncake"] = {"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 64, "metricsPort": 6789}

    with pytest.raises(StackError) as info:
        load_stack("broken", write_stack("mi355x-replicas", change))
    [problem] = [p for p in info.value.problems if p.rule == "port-collision"]
    assert problem.path == f"{S}.mooncake.metricsPort"
    assert "replica-0 --engine-info-bootstrap-port" in problem.message
