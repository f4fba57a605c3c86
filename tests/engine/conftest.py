"""Two test hosts (an H200 and an MI355X) running a real Docker engine: Debian's docker.io 20.10,
installed by the container_runtime role from Docker's package names in the local apt
repository, reached as the non-root login user; then the SGLang base images imported under the
names the launch pins (the H200 host's the faithful base, with the release's own packages; the
MI355X host's the stand-in; tests/hosts/engine_images.py), their Debian archive the controller's (which also serves, when
scripts/setup.d/27-sglang-image-build.sh has fetched them, Debian's ffmpeg and the wheels of the
sglang_image role's pins at `wheels_url`). Each set-up step prints its time."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hosts.aptrepo import ENGINE_DEBS, IMAGE_BUILD, AptRepository, real_engine_version
from hosts.engine_images import import_image, stop_engines
from hosts.harness import HostPool, HostSpec
from roles.hardware import AMD_DEVICES, H200, IMAGES, MI355X, NVIDIA_DEVICES, facts

from flashfleet.bringup.playbook_run import RunResult, run_playbook

IB_DEVICES = ("/dev/infiniband/uverbs0",)  # the Mooncake (RDMA) stacks pass /dev/infiniband
HOSTS = [
    HostSpec("h200", H200, NVIDIA_DEVICES + IB_DEVICES, container_engine=True),
    HostSpec("mi355x", MI355X, AMD_DEVICES, container_engine=True),
]
# Pinned base images per host: GB300's multi-arch -cu130 build runs on the x86_64 H200 host.
BASES = {
    "h200": [IMAGES["h200"], IMAGES["gb300"]],
    "mi355x": [IMAGES["mi355x"]],
}
# The H200 host's base is the faithful one: the release's own torch, torchcodec, transformers,
# tokenizers and sglang wheel (PyPI's, as the release pins them for linux x86_64). The ROCm
# image's torch is not PyPI's: MI355X keeps the stand-in.
FAITHFUL = {"h200"}
# An older release's base, without torch (the stand-in): its derived build runs up to the vendor
# torch, on the H200 host (tests/engine/test_derived_image_build.py).
OLDER_BASE = "lmsysorg/sglang:v0.5.20"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Engine:
    pool: HostPool
    base_url: str
    runs: Path
    version: str  # what `docker version` must report: the upstream part of docker.io's version
    timings: dict[str, float] = field(default_factory=dict)
    installs: list[RunResult] = field(default_factory=list)
    repo: AptRepository | None = None  # the lab's apt repositories, served at base_url
    _counter: int = 0

    @property
    def wheels_url(self) -> str:
        """pip's find-links for the derived image's build (tests/hosts/aptrepo.IMAGE_BUILD)."""
        return f"{self.base_url}/sglang-image-wheels/"

    def play(
        self,
        hosts: list[str],
        tags: str = "container_runtime",
        check: bool = False,
        extravars: dict[str, Any] | None = None,
        skip_tags: str | None = None,
    ) -> RunResult:
        self._counter += 1
        inventory_hosts = {h: {**self.pool.inventory_host(h), **facts(h)} for h in hosts}
        children: dict[str, Any] = {"flashfleet": {"hosts": {h: {} for h in hosts}}}
        for h in hosts:
            for group in (f"vendor_{facts(h)['flashfleet_vendor']}", f"hw_{h}"):
                children.setdefault(group, {"hosts": {}})["hosts"][h] = {}
        return run_playbook(
            "prepare.yml",
            {"all": {"hosts": inventory_hosts, "children": children}},
            run_dir=self.runs / f"{self._counter:03d}-{tags}",
            extravars={
                "container_runtime_docker_repo_url": f"{self.base_url}/docker/linux",
                "container_runtime_nvidia_repo_url": f"{self.base_url}/libnvidia-container",
                "container_runtime_docker_version": self.version,
                **(extravars or {}),
            },
            tags=tags,
            skip_tags=skip_tags,
            check=check,
            reconverge=True,  # a second run must run the roles again: it tests their idempotence
        )

    def sh(self, host: str, command: str) -> subprocess.CompletedProcess[str]:
        """A command as root on the host (the test's own probe, not Ansible's login)."""
        return self.pool.ssh(host, command, check=False)


def _timed(timings: dict[str, float], step: str, start: float) -> None:
    timings[step] = time.monotonic() - start
    print(f"[engine set-up] {step}: {timings[step]:.1f} s", flush=True)


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    if not (ENGINE_DEBS / ".ok").exists():
        raise RuntimeError(f"{ENGINE_DEBS} missing: run scripts/setup.d/25-docker-engine.sh")
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-engine-", dir="/var/tmp"))
    pool = HostPool(workdir / "hosts")
    server: ThreadingHTTPServer | None = None
    timings: dict[str, float] = {}
    try:
        start = time.monotonic()
        image_build = (IMAGE_BUILD / ".ok").exists()  # else the derived-image build test says so
        repo = AptRepository(workdir / "www", workdir / "gnupg", engine_debs=ENGINE_DEBS,
                             debian_debs=IMAGE_BUILD / "debs" if image_build else None)  # fmt: skip
        repo.build()
        if image_build:
            shutil.copytree(IMAGE_BUILD / "wheels", workdir / "www/sglang-image-wheels")
        _timed(timings, "apt repository", start)
        handler = functools.partial(_QuietHandler, directory=str(workdir / "www"))
        server = ThreadingHTTPServer((pool.gateway, 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        start = time.monotonic()
        pool.start(HOSTS)
        _timed(timings, "boot 2 hosts", start)
        version = real_engine_version().split("-")[0]
        lab = Engine(pool, f"http://{pool.gateway}:{server.server_address[1]}", workdir / "runs",
                     version, timings, repo=repo)  # fmt: skip
        start = time.monotonic()
        lab.installs.append(lab.play([h.name for h in HOSTS]))
        _timed(timings, "container_runtime role, real dockerd on 2 hosts (in parallel)", start)
        if lab.installs[0].ok:
            apt = {
                "apt_repo": f"{lab.base_url}/debian",
                "apt_key": (workdir / "www/repo-key.asc").read_text(),
            }
            for host, refs in BASES.items():
                start = time.monotonic()
                import_image(pool, host, refs[0], release=host in FAITHFUL, **apt)
                for ref in refs[1:]:
                    pool.ssh(host, f"docker tag {refs[0]} {ref}")
                kind = "faithful base (the release's packages)" if host in FAITHFUL else "stand-in image"
                _timed(timings, f"docker import of the {kind} on {host}", start)
            start = time.monotonic()
            import_image(pool, "h200", OLDER_BASE, **apt)
            _timed(timings, f"docker import of the stand-in image as {OLDER_BASE} on h200", start)
        yield lab
    finally:
        if server is not None:
            server.shutdown()
        stop_engines(pool, pool.hosts)
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)
