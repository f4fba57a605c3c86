"""Weights fetched once per stack, as planned: a locked stack of several GPU nodes names its seed
and hands each GPU node its part; `plan` models the fan-out after the seed's download and says
what the Hub is asked; without a lock every node asks the Hub, and the plan says so."""

from __future__ import annotations

import dataclasses

from flashfleet.inventory import build_inventory
from flashfleet.planning.critical_path import critical_path
from flashfleet.planning.resolve import StackPlan, load_stack
from flashfleet.planning.weights_fanout import FANOUT_PORT, fanout_seed
from flashfleet.stack.lock import StackLock


def locked(plan: StackPlan) -> StackPlan:
    repo = plan.recipe.repositories[0]
    lock = StackLock.model_validate(
        {
            "stack": plan.stack,
            "locked_on": "2026-12-01",
            "weights": {
                repo: {
                    "revision": "main",
                    "commit": "a" * 40,
                    "files": {"config.json": {"size": 2, "git_oid": "b" * 40}},
                }
            },
        }
    )
    return dataclasses.replace(plan, lock=lock)


def test_a_locked_stack_of_three_gpu_nodes_has_one_seed_and_two_peers() -> None:
    plan = locked(load_stack("gb300-2p1d"))
    gpu = plan.gpu_nodes
    assert len(gpu) == 3
    assert fanout_seed(plan) == gpu[0]
    private = [f"10.0.0.{i + 1}" for i in range(len(plan.nodes))]
    inventory = build_inventory(plan, [f"192.0.2.{i}" for i in range(len(plan.nodes))], private)
    parts = {h: v.get("flashfleet_weights_fanout") for h, v in inventory["all"]["hosts"].items()}
    seed = parts[gpu[0].name]
    assert seed == {
        "role": "seed",
        "seed": gpu[0].name,
        "seed_address": private[gpu[0].index],
        "port": FANOUT_PORT,
        "peers": [n.name for n in gpu[1:]],
        "wait_s": 300,
    }
    for node in gpu[1:]:
        assert parts[node.name] == {**seed, "role": "peer", "peers": []}
    for node in plan.nodes:
        if not node.gpu_node:  # a router's own host downloads nothing
            assert parts[node.name] is None


def test_plan_models_the_fanout_beside_the_seeds_download_and_one_download_from_the_hub() -> None:
    plan = locked(load_stack("gb300-2p1d"))
    cp = critical_path(plan)
    assert sorted(cp.lanes) == [["driver", "image"], ["fanout"], ["weights"]]
    weights, fanout = (next(p for p in cp.phases if p.name == n) for n in ("weights", "fanout"))
    # streamed: each file leaves the seed as soon as its download completed it
    assert fanout.start_s == weights.start_s == 0.0
    assert "fanout" in weights.overlaps
    assert "each file as soon as" in fanout.source
    # the seed's link carries the checkpoint to each of its two peers
    assert (fanout.size_gb, fanout.gbps) == (2 * 328.0, 25.0)
    assert fanout.seconds == round(656 * 8 / 25, 1)
    assert "peers over the cluster network" in fanout.source
    assert "assumed" in fanout.source
    assert (cp.hub_gb, cp.hub_downloads) == (328.0, 1)
    assert "huggingface_hub issue #3312" in cp.hub_source
    assert "NVIDIA/aicr issue #1116" in cp.hub_source
    assert "not published" in cp.hub_source


def test_without_a_lock_every_gpu_node_asks_the_hub_and_the_plan_says_why() -> None:
    plan = load_stack("gb300-2p1d")
    assert plan.lock is None
    assert fanout_seed(plan) is None
    cp = critical_path(plan)
    assert "fanout" not in [p.name for p in cp.phases]
    assert (cp.hub_gb, cp.hub_downloads) == (3 * 328.0, 3)
    assert cp.hub_source.startswith("each GPU node downloads on its own (no lock:")


def test_a_single_node_stack_has_no_fanout() -> None:
    plan = locked(load_stack("h200-lowlat"))
    assert fanout_seed(plan) is None
    assert (critical_path(plan).hub_gb, critical_path(plan).hub_downloads) == (328.0, 1)


def test_time_to_first_token_counts_the_fanout_in_the_transfers_lane() -> None:
    # the fan-out is a transfer beside the seed's download: both bring-ups count it, and plan's
    # view builds (it failed on a phase the lanes named and the model did not know)
    from flashfleet.planning.plan_view import plan_data
    from flashfleet.planning.time_to_first_token import time_to_first_token

    plan = locked(load_stack("gb300-2p1d"))
    cp = critical_path(plan)
    model = time_to_first_token(plan, cp)
    [fanout] = [p for p in model.phases if p.name == "fanout"]
    assert fanout.first_s is not None
    assert fanout.first_s > 0
    unlocked = time_to_first_token(load_stack("gb300-2p1d"), critical_path(load_stack("gb300-2p1d")))
    assert "fanout" not in [p.name for p in unlocked.phases]
    assert plan_data(plan).critical_path.hub_downloads == 1
