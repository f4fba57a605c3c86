"""`verify` on hicache l1l2l3 shows a READ from the storage tier: playbooks/verify.yml runs for
real (ansible-runner, local connection) against a stand-in server whose /metrics counts what it
served, and whose L3 tier is a real Mooncake store on loopback (a real master; the server's
segment and a second client's, tests/hosts/mooncake_loopback.py); an L3 that takes writes but
never returns a hit fails with the counters named."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hosts.mooncake_loopback import Loopback, mooncake_loopback

from flashfleet.bringup.playbook_run import run_playbook
from tests.serve.standin_sglang import StandinServer, StandinState

ARGV = [
    "sglang",
    "serve",
    "--enable-hierarchical-cache",
    "--hicache-storage-backend",
    "mooncake",
    "--enable-metrics",
]


def verify(tmp_path: Path, server: StandinServer, argv: list[str] = ARGV):
    port = int(server.url.rsplit(":", 1)[1])
    host = {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
        "flashfleet_processes": [{"name": "server", "argv": argv, "port": port, "image": "standin"}],
        "flashfleet_mooncake": False, "flashfleet_api_port": port,
        "flashfleet_reasoning": False, "flashfleet_tool_calls": False,
        # decided in Python from the recipe (hicache l1l2l3), never read back from argv
        "flashfleet_hicache_storage": "--hicache-storage-backend" in argv,
    }  # fmt: skip
    inventory = {"all": {"children": {"flashfleet": {"hosts": {"node-0": host}}}}}
    return run_playbook(
        "verify.yml", inventory, run_dir=tmp_path / "run",
        extravars={"verify_image": False, "verify_hicache_settle_s": 0, "verify_hicache_prefix_words": 512},
        records=False,  # this machine is the node: keep no converge record on it
    )  # fmt: skip


@pytest.fixture
def mooncake(tmp_path: Path) -> Iterator[Loopback]:
    """A master of each test's own: one test's prefix in the pool would be another's hit."""
    with mooncake_loopback(tmp_path) as loopback:
        yield loopback


def test_l3_that_reads_back_passes(tmp_path, mooncake):
    with StandinServer(StandinState(l3_reads=True, l3=mooncake.client())) as server:
        result = verify(tmp_path, server)
        paths = server.state.paths()
        prompts = {served.prompt for served in server.state.served_log}
    assert result.ok, result.summary()
    # two rounds of prefix, flush, prefix; metrics read before and after
    assert paths.count("/generate") == 4
    assert paths.count("/flush_cache") == 2
    assert paths.count("/metrics") == 2
    # what the server wrote is in the master's pool: another client reads the same bytes back
    other = mooncake.client()
    assert prompts
    for prompt in prompts:
        key = "standin-prefix-" + hashlib.sha256(prompt.encode()).hexdigest()
        assert other.get(key) == prompt.encode()


def test_l3_that_writes_but_never_reads_fails_with_the_counter_named(tmp_path, mooncake):
    with StandinServer(StandinState(l3_reads=False, l3=mooncake.client())) as server:
        result = verify(tmp_path, server)
    assert not result.ok
    (failure,) = result.failures
    assert failure.task == "tokens were read back from the storage tier"
    assert (
        "HiCache L3 never read back: sglang:storage_prefetch_hit_tokens_total stayed at 0" in failure.message
    )
    assert "(512 tokens were written to the store meanwhile)" in failure.message


def test_without_a_storage_tier_the_check_does_not_run(tmp_path):
    with StandinServer(StandinState(l3_reads=False)) as server:
        result = verify(tmp_path, server, argv=["sglang", "serve", "--enable-hierarchical-cache"])
        assert "/metrics" not in server.state.paths()
    assert result.ok, result.summary()
