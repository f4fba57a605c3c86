"""Each published seed command comes out of its render, with no overrides, flag for flag."""

import shlex
from pathlib import Path

import pytest

from flashfleet.recipes import render
from flashfleet.recipes.flags import argv_units

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


def seed_argv(name: str) -> list[str]:
    return shlex.split(SEED.joinpath(name).read_text().replace("\\\n", " "))


@pytest.mark.parametrize(("golden", "hardware", "strategy", "topology", "process"), CASES)
def test_seed_command_reproduced(golden: str, hardware: str, strategy: str, topology: str, process: str):
    recipe = render(hardware, strategy, topology)
    proc = next(p for p in recipe.processes if p.name == process)
    expected = argv_units(seed_argv(golden))
    got = argv_units(proc.argv)
    assert got[0] == expected[0]  # sglang serve / python -m sglang_router.launch_router
    assert len(set(got)) == len(got), "a flag is rendered twice"
    assert set(got) - set(expected) == ADDED.get(process, set())
    assert set(expected) - set(got) == set()


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
