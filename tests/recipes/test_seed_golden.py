"""Each published seed command comes out of its render, with no overrides, flag for flag."""

import shlex
from pathlib import Path

import pytest

from flashfleet.recipes import render
from flashfleet.recipes.flags import argv_units
from flashfleet.recipes.router_settings import settings_flags

SEED = Path(__file__).parent / "golden" / "seed"

# (golden file, hardware, strategy, topology, process)
CASES = [
    ("encoder-disagg.encoder.sh", "gb300", "low-latency", "encoder-disagg", "encoder"),
    ("encoder-disagg.language.sh", "gb300", "low-latency", "encoder-disagg", "language"),
    ("prefill-cp.server.sh", "gb300", "low-latency", "prefill-cp", "server"),
    ("pd.prefill.sh", "gb300", "high-throughput", "pd", "prefill"),
    ("pd.decode.sh", "gb300", "high-throughput", "pd", "decode"),
    ("pd.router.sh", "gb300", "high-throughput", "pd", "router"),
]

# The seed's operational note asks for a distinct --nccl-port per PD role on a shared node; its
# printed commands omit it. Each PD server also exports its own counters (--enable-metrics), which
# the benchmark reads to show that prefill and decode both served their share (no silent
# fallback). These are the only words a render adds to a seed command.
ADDED = {
    "prefill": {("--nccl-port", "31500"), ("--enable-metrics",)},
    "decode": {("--nccl-port", "32500"), ("--enable-metrics",)},
}


# The seed's PD router is sglang_router's Python mini load balancer (`--mini-lb`); flashfleet runs
# SMG (`smg launch`), which has no mini load balancer: its Rust PD router takes the same prefill
# (with its bootstrap port) and decode, and the router's timeouts and health checks are written out.
SMG_FOR_SEED = {("python", "-m", "sglang_router.launch_router"): ("smg", "launch")}
DROPPED = {"router": {("--mini-lb",)}}


def seed_argv(name: str) -> list[str]:
    return shlex.split(SEED.joinpath(name).read_text().replace("\\\n", " "))


@pytest.mark.parametrize(("golden", "hardware", "strategy", "topology", "process"), CASES)
def test_seed_command_reproduced(golden: str, hardware: str, strategy: str, topology: str, process: str):
    recipe = render(hardware, strategy, topology)
    proc = next(p for p in recipe.processes if p.name == process)
    expected = argv_units(seed_argv(golden))
    got = argv_units(proc.argv)
    assert got[0] == SMG_FOR_SEED.get(expected[0], expected[0])  # sglang serve / smg launch
    assert len(set(got)) == len(got), "a flag is rendered twice"
    added = ADDED.get(process, set())
    if process == "router":
        added = set(argv_units(settings_flags("pd")))
    assert set(got[1:]) - set(expected[1:]) == added
    assert set(expected[1:]) - set(got[1:]) == DROPPED.get(process, set())


def test_seed_pd_router_is_reproduced_exactly_with_the_release_images_router():
    """`router=sglang_router` (the release image's own router) keeps the seed's command word for
    word, `--mini-lb` included."""
    recipe = render("gb300", "high-throughput", "pd", {"router": "sglang_router"})
    router = next(p for p in recipe.processes if p.name == "router")
    assert argv_units(router.argv) == argv_units(seed_argv("pd.router.sh"))


def test_pd_router_bootstrap_port_equals_prefill_bootstrap_port():
    recipe = render("gb300", "high-throughput", "pd")
    by_name = {p.name: p for p in recipe.processes}
    prefill = dict(u for u in argv_units(by_name["prefill"].argv) if len(u) == 2)
    router = by_name["router"].argv
    i = router.index("--prefill")
    assert router[i + 1] == f"http://127.0.0.1:{by_name['prefill'].port}"
    assert router[i + 2] == prefill["--disaggregation-bootstrap-port"]
    assert router[router.index("--decode") + 1] == f"http://127.0.0.1:{by_name['decode'].port}"


def test_pd_roles_environment_and_gpus():
    recipe = render("gb300", "high-throughput", "pd")
    by_name = {p.name: p for p in recipe.processes}
    for role in ("prefill", "decode"):
        assert by_name[role].env["UCX_NET_DEVICES"] == "lo"
        assert by_name[role].env["UCX_TLS"] == "tcp,cuda_copy,cuda_ipc,self,sm"
    assert by_name["prefill"].gpus == (0, 1)
    assert by_name["decode"].gpus == (2, 3)
    assert by_name["router"].start_after == ("prefill", "decode")
    nccl = [
        dict(u for u in argv_units(by_name[r].argv) if len(u) == 2)["--nccl-port"]
        for r in ("prefill", "decode")
    ]
    assert len(set(nccl)) == 2


def test_encoder_starts_before_language():
    recipe = render("gb300", "low-latency", "encoder-disagg")
    order = [p.name for p in recipe.start_order()]
    assert order == ["encoder", "language"]
    language = next(p for p in recipe.processes if p.name == "language")
    assert language.start_after == ("encoder",)
    assert language.port == 30000
