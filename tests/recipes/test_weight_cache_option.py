"""options.weight_cache: SGLang 0.5.23's weight-cache client on every model server, its badge,
and SGLang's own limits refused before a node boots."""

import pytest

from flashfleet.recipes import RecipeError, render
from flashfleet.recipes.flags import argv_units


def flags(argv) -> dict[str, tuple[str, ...]]:
    return {u[0]: u[1:] for u in argv_units(argv)[1:]}


@pytest.mark.parametrize(
    ("hardware", "topology", "overrides"),
    [("h200", "unified", {}), ("gb300", "pd", {}), ("h200", "unified", {"replicas": 2})],
)
def test_client_mode_reaches_every_model_server_with_the_shared_socket_folder(hardware, topology, overrides):
    on = render(hardware, "high-throughput", topology, {"weight_cache": "client", **overrides})
    servers = [p for p in on.processes if p.role != "router"]
    assert servers
    for proc in servers:
        assert flags(proc.argv)["--weight-cache-mode"] == ("client",)
        # the daemon's container finds the socket on the cache volume, not in this one's /tmp
        sock = proc.env["SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"]
        assert sock.startswith("/root/.cache/huggingface/")
        assert "{device_uuid}" in sock
        assert len(sock.replace("{device_uuid}", "GPU-" + "0" * 36)) < 108  # a Unix socket path
    router = [p for p in on.processes if p.role == "router"]
    assert all("--weight-cache-mode" not in p.argv for p in router)
    off = render(hardware, "high-throughput", topology, overrides)
    assert all("--weight-cache-mode" not in p.argv for p in off.processes)
    assert all("SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE" not in p.env for p in off.processes)


def test_client_mode_is_not_verified_and_says_what_flashfleet_does_not_start():
    on = render("h200", "high-throughput", "unified", {"weight_cache": "client"})
    assert on.badge == "Not Verified"
    assert "weight_cache" in on.badge_source
    note = next(n for n in on.notes if n.startswith("weight_cache=client"))
    assert "does not start that daemon" in note
    assert "from disk" in note


@pytest.mark.parametrize(
    ("hardware", "strategy", "overrides", "words"),
    [
        # low-latency runs MTP (EAGLE): SGLang's model_path_hook refuses the pair
        ("h200", "low-latency", {}, "speculative"),
        ("gb300", "high-throughput", {"speculative": "eagle"}, "speculative"),
        ("gb300", "high-throughput", {"precision": "nvfp4"}, "block-wise FP8"),
        ("h200", "high-throughput", {"replicas": 2, "peer_load": "on"}, "peer_load"),
        ("mi355x", "high-throughput", {}, "CUDA IPC"),
    ],
)
def test_sglangs_limits_are_refused_by_rule(hardware, strategy, overrides, words):
    with pytest.raises(RecipeError) as err:
        render(hardware, strategy, "unified", {"weight_cache": "client", **overrides})
    assert err.value.rule == "weight-cache-limits"
    assert words in str(err.value)


def test_extra_args_may_not_set_the_weight_cache_a_second_way():
    with pytest.raises(RecipeError) as err:
        render("h200", "high-throughput", "unified", {"extra_args": ["--weight-cache-mode", "daemon"]})
    assert "weight_cache" in str(err.value)
