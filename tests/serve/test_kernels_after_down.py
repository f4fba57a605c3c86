"""The second bring-up on two test hosts (the real Docker engine, the stand-in image): after
`down` with the caches kept, every node's server finds its kernels built in the folder its
first bring-up filled on its own cache volume (the stand-in's jit_seconds not paid).

(`down` with teardown.keepCaches false deletes a cache only where model_weights left its marker,
which these hosts, prepared without the prepare plays, do not hold: tests/roles covers it.)"""

from __future__ import annotations

from typing import Any

from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.timeline import build_timeline, read_events
from flashfleet.launch import CONTAINER_HF_CACHE

from .lab import ServeLab, make_stack, serve_lab
from .test_site import set_knobs

HOSTS = ["w0", "w1"]
JIT_SECONDS = 3.0
SITE_TAGS = "mooncake,serve,verify"
FAST = {"sglang_serve_ready_timeout_s": 60, "sglang_serve_ready_poll_s": 1}


def _builds(lab: ServeLab, result: RunResult) -> dict[str, float]:
    """Each serving container's JIT builds in this run, from its own log."""
    assert result.ok, lab.explain(result)
    startup = build_timeline(read_events(result.events_log)).startup
    return {f"{node}/{name}": t.jit_s for node, by_name in startup.items() for name, t in by_name.items()}


def _kernel_folders(inventory: dict[str, Any]) -> set[str]:
    return {
        launch["env"]["TVM_FFI_CACHE_DIR"]
        for facts in inventory["all"]["hosts"].values()
        for launch in facts.get("flashfleet_processes", [])
        if launch["role"] != "router"
    }


def test_every_node_starts_warm_after_down_with_its_cache_kept() -> None:
    with serve_lab(HOSTS) as lab:
        for host in HOSTS:
            set_knobs(lab, host, jit_seconds=JIT_SECONDS)
        cluster = {"replicas": 2, "router": {"policy": "round_robin"}}
        addresses = [lab.address(h) for h in HOSTS]
        stack = make_stack("warm", "unified", addresses, strategy="high-throughput", cluster=cluster)
        inventory = lab.inventory((stack, HOSTS))
        assert len(_kernel_folders(inventory)) == 1  # one key: the same image and GPU on both nodes

        cold = _builds(lab, lab.run("site.yml", inventory, tags=SITE_TAGS, extravars=FAST))
        assert len(cold) == 2, cold  # one replica a node, each with its own log
        assert all(s >= JIT_SECONDS - 0.5 for s in cold.values()), cold

        down = lab.run("teardown.yml", inventory)
        assert down.ok, lab.explain(down)
        warm = _builds(lab, lab.run("site.yml", inventory, tags=SITE_TAGS, extravars=FAST))
        assert set(warm) == set(cold)
        assert all(s < 0.5 for s in warm.values()), warm

        # where they were kept: the one folder the launches name, on each node's cache volume
        (folder,) = _kernel_folders(inventory)
        by_address = {lab.address(h): h for h in HOSTS}
        for facts in inventory["all"]["hosts"].values():
            host, cache = by_address[facts["ansible_host"]], facts["flashfleet_model_cache_dir"]
            on_host = folder.replace(CONTAINER_HF_CACHE, cache, 1)
            assert lab.ssh(host, f"ls {on_host}").split() == ["standin-kernels.so"], (host, on_host)
