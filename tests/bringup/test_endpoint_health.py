"""A cluster's endpoint health from its inventory: the router's list and each worker's own /health."""

from __future__ import annotations

import json

from flashfleet.bringup.endpoint_health import endpoint_health
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack

SSH = ["192.0.2.10", "192.0.2.11"]
PRIVATE = ["10.1.0.10", "10.1.0.11"]


def _inventory():
    return build_inventory(load_stack("mi355x-replicas"), SSH, PRIVATE)


def _workers(*healthy: str) -> str:
    urls = ["http://10.1.0.10:31000", "http://10.1.0.11:31000"]
    return json.dumps({"workers": [{"url": u, "is_healthy": u in healthy} for u in urls]})


def test_every_instance_healthy_is_serving():
    answers = {
        "http://192.0.2.10:30000/workers": (
            200,
            _workers("http://10.1.0.10:31000", "http://10.1.0.11:31000"),
        ),
        "http://192.0.2.10:31000/health": (200, ""),
        "http://192.0.2.11:31000/health": (200, ""),
    }
    health = endpoint_health(_inventory(), lambda url, timeout: answers[url])
    assert health is not None
    assert health.state == "serving"
    assert (
        health.line()
        == "endpoint: serving: 2 of 2 instances healthy behind the router at http://192.0.2.10:30000"
    )


def test_a_dead_worker_the_router_still_lists_healthy_is_degraded_and_named():
    # the router marks a worker unhealthy only after several failed checks: its own /health tells
    answers = {
        "http://192.0.2.10:30000/workers": (
            200,
            _workers("http://10.1.0.10:31000", "http://10.1.0.11:31000"),
        ),
        "http://192.0.2.10:31000/health": (200, ""),
        "http://192.0.2.11:31000/health": (0, "Connection refused"),
    }
    health = endpoint_health(_inventory(), lambda url, timeout: answers[url])
    assert health is not None
    assert health.state == "degraded"
    assert [i.instance for i in health.down] == ["replica-1"]
    assert "replica-1 (http://10.1.0.11:31000: not reachable from here (Connection refused))" in health.line()


def test_an_unlisted_worker_is_degraded_and_a_silent_router_is_down():
    answers = {
        "http://192.0.2.10:30000/workers": (200, _workers("http://10.1.0.10:31000")),
        "http://192.0.2.10:31000/health": (200, ""),
        "http://192.0.2.11:31000/health": (200, ""),
    }
    health = endpoint_health(_inventory(), lambda url, timeout: answers[url])
    assert health is not None
    assert "replica-1 (http://10.1.0.11:31000: the router does not list it healthy)" in health.line()
    answers["http://192.0.2.10:30000/workers"] = (0, "timed out")
    assert endpoint_health(_inventory(), lambda url, timeout: answers[url]).state == "down"


def test_a_stack_of_one_instance_has_no_cluster_health():
    inv = build_inventory(load_stack("mi355x-throughput"), SSH[:1], PRIVATE[:1])
    assert endpoint_health(inv, lambda url, timeout: (200, "")) is None


def test_a_pd_cluster_with_no_prefill_up_is_down_and_names_it():
    """One prefill and its decode: the decode alone serves nothing, so the endpoint is down."""
    inv = build_inventory(load_stack("gb300-2p1d"), ["192.0.2.10", "192.0.2.11", "192.0.2.12"],
                          ["10.1.0.10", "10.1.0.11", "10.1.0.12"])  # fmt: skip
    listed = ["http://10.1.0.10:31000", "http://10.1.0.11:31000", "http://10.1.0.12:32000"]
    answers = {
        "http://192.0.2.10:30000/workers": (200, json.dumps({"workers": [{"url": u, "is_healthy": True} for u in listed]})),
        "http://192.0.2.10:31000/health": (0, "Connection refused"),
        "http://192.0.2.11:31000/health": (200, ""),
        "http://192.0.2.12:32000/health": (200, ""),
    }  # fmt: skip
    one_prefill_up = endpoint_health(inv, lambda url, timeout: answers[url])
    assert one_prefill_up is not None
    assert one_prefill_up.state == "degraded"
    answers["http://192.0.2.11:31000/health"] = (503, "")
    none_up = endpoint_health(inv, lambda url, timeout: answers[url])
    assert none_up is not None
    assert none_up.state == "down"
    assert none_up.line().startswith("endpoint: down: no prefill instance is up; down: prefill-0 (")
