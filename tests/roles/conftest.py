"""One lab per test session: a signed local apt repository, a stand-in Hub and six booted
systemd hosts (H200, a Deep Learning AMI H200, two GB300 trays, MI355X, a CPU router host),
shared by every role test and removed at the end (also on failure)."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hosts import standin_images
from hosts.aptrepo import DRIVER, AptRepository
from hosts.harness import CACHE, HostPool, HostSpec
from hosts.hub import Hub, Repo

from flashfleet.bringup.playbook_run import Progress, RunResult, run_playbook

from .hardware import DRAFT, MODEL, SPECS, facts

GROUP_OF = {"h200": "h200", "dlami": "h200", "gb300a": "gb300", "gb300b": "gb300",
            "mi355x": "mi355x", "router": "h200"}  # fmt: skip
TOKEN = "hf_flashfleetTESTtoken0123456789abcdef"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Lab:
    pool: HostPool
    repo: AptRepository
    base_url: str
    hub: Hub
    hub_url: str
    runs: Path
    groups: dict[str, str]  # host -> hardware (GROUP_OF unless open_lab is told otherwise)
    _counter: int = 0

    def repo_vars(self) -> dict[str, Any]:
        """Role arguments that point every vendor repository at the local one."""
        b = self.base_url
        return {
            "nvidia_driver_repo_url": f"{b}/cuda/repos",
            "container_runtime_docker_repo_url": f"{b}/docker/linux",
            "container_runtime_nvidia_repo_url": f"{b}/libnvidia-container",
            "rocm_driver_amdgpu_repo_url": f"{b}/amdgpu",
            "rocm_driver_rocm_repo_url": f"{b}/rocm/apt",
            "rocm_driver_repo_key_url": f"{b}/rocm/rocm.gpg.key",
            "model_weights_hf_endpoint": self.hub_url,
            # the stand-in Hub speaks plain http on the test network: its gated repositories
            # need the token there
            "model_weights_hf_token_over_http": True,
            "model_weights_pip_find_links": f"{b}/wheels/",
            "model_weights_pip_trusted_host": self.pool.gateway,
        }

    def inventory(self, hostvars: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The inventory shape flashfleet.inventory writes, for the given hosts and facts."""
        hosts = {h: {**self.pool.inventory_host(h), **v} for h, v in hostvars.items()}
        children: dict[str, Any] = {"flashfleet": {"hosts": {h: {} for h in hosts}}}
        for h, v in hostvars.items():
            if not v["flashfleet_gpu_node"]:
                continue  # a router's own host: in no vendor or hardware group (flashfleet.inventory)
            for group in (f"vendor_{v['flashfleet_vendor']}", f"hw_{v['flashfleet_hardware']}"):
                children.setdefault(group, {"hosts": {}})["hosts"][h] = {}
        return {"all": {"hosts": hosts, "children": children}}

    def play(
        self,
        hosts: list[str],
        tags: str,
        *,
        check: bool = False,
        facts_override: dict[str, dict[str, Any]] | None = None,
        extravars: dict[str, Any] | None = None,
        token: str | None = TOKEN,
        reconverge: bool = True,
    ) -> Run:
        self._counter += 1
        hostvars = {}
        # the GB300 hosts of one play are one stack's NVLink domain (flashfleet.inventory)
        domain = [self.pool.hosts[h].address for h in hosts if self.groups[h] == "gb300"]
        for i, h in enumerate(hosts):
            hw = self.groups[h]
            index = i if hw == "gb300" else 0
            imex = {"flashfleet_imex_nodes": domain} if hw == "gb300" else {}
            hostvars[h] = facts(hw, index, **{**imex, **(facts_override or {}).get(h, {})})
        progress: list[Progress] = []
        result = run_playbook(
            "prepare.yml",
            self.inventory(hostvars),
            run_dir=self.runs / f"{self._counter:03d}-{tags}",
            extravars={**self.repo_vars(), **(extravars or {})},
            hf_token=token,
            check=check,
            tags=tags,
            on_progress=progress.append,
            reconverge=reconverge,
        )
        return Run(result, progress)


@dataclass
class Run:
    result: RunResult
    progress: list[Progress]

    @property
    def ok(self) -> bool:
        return self.result.ok

    def changed(self, host: str | None = None) -> int:
        return self.result.count("changed", host)

    def changed_tasks(self, host: str) -> list[str]:
        return [f"{p.role}:{p.task}" for p in self.progress if p.host == host and p.status == "changed"]

    def statuses(self, host: str) -> dict[str, str]:
        """role:task -> last status on `host` (looped tasks keep the last item's status)."""
        return {f"{p.role}:{p.task}": p.status for p in self.progress if p.host == host}

    def explain(self) -> str:
        lines = [self.result.summary(), *(str(p) for p in self.progress)]
        return "\n".join(lines)


def _hub() -> Hub:
    """A checkpoint of a few shards and its gated draft (sizes are small, the layout real)."""
    hub = Hub(token=TOKEN)
    shards = {f"model-0000{i}-of-00002.safetensors": bytes([i]) * 1_500_000 for i in (1, 2)}
    hub.repos[MODEL] = Repo({"config.json": b'{"model_type": "glm5_next"}', **shards})
    hub.repos[DRAFT] = Repo({"config.json": b'{"model_type": "dflash2"}'}, gated=True)
    return hub


def _install_dlami_driver(pool: HostPool, repo: AptRepository) -> None:
    """The `dlami` host gets the pinned driver the way an AMI has it: installed and running."""
    deb = repo.debs[f"nvidia-driver-595-open={DRIVER}-1"]
    shutil.copy(deb, pool.hosts["dlami"].root / "root/driver.deb")
    pool.ssh("dlami", "dpkg -i /root/driver.deb && systemctl enable --now nvidia-persistenced")


STATE_PROBE = (
    "dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\\n' | sort; "
    "find /etc /opt /var/lib/flashfleet /var/lib/docker -xdev -type f 2>/dev/null "
    "| sort | xargs -r md5sum; systemctl list-units --state=active --no-legend --plain | sort"
)


def host_state(lab: Lab, host: str) -> str:
    """Packages, configuration files and running units: what check mode must not touch."""
    return lab.pool.ssh(host, STATE_PROBE).stdout


def assert_no_change(run: Run) -> None:
    """A converged host: the run succeeds and reports changed=0."""
    assert run.ok, run.explain()
    assert run.changed() == 0, run.explain()


def assert_same_plan(check: Run, real: Run, host: str, *more: Run) -> None:
    """Check mode announced what the real run(s) then did: every task the real run changed was
    reported changed in check mode, or could not be previewed there (a command skipped by
    check mode, a package of a repository check mode did not add); nothing else changed."""
    planned = check.statuses(host)
    changed = {t for r in (real, *more) for t, s in r.statuses(host).items() if s == "changed"}
    assert changed, real.explain()
    for task in changed:
        assert planned.get(task) in {"changed", "skipped", "failed"}, (task, check.explain())
    assert {t for t, s in planned.items() if s == "changed"} <= changed, check.explain()


@contextmanager
def open_lab(
    specs: list[HostSpec],
    groups: dict[str, str] | None = None,
    engine_debs: Path | None = None,
    debian_debs: Path | None = None,
) -> Iterator[Lab]:
    """Boots `specs` with the signed apt repository, the wheels and the stand-in Hub; removes
    every trace on exit (also on failure). Shared by the role tests and benchmarks/bringup.py.
    `groups` names each host's hardware (default GROUP_OF); with `engine_debs` the repository
    serves the real Docker engine (hosts.aptrepo) rather than the stand-in one; with
    `debian_debs`, Debian's own packages as the images' archive (the derived image's FFmpeg)."""
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-lab-", dir="/var/tmp"))
    pool = HostPool(workdir / "hosts")
    server: ThreadingHTTPServer | None = None
    hub = _hub()
    try:
        repo = AptRepository(
            workdir / "www", workdir / "gnupg", engine_debs=engine_debs, debian_debs=debian_debs
        )
        repo.build()
        # the download client's wheels, fetched by scripts/setup.d/20-test-hosts.sh
        shutil.copytree(CACHE / "wheels", workdir / "www/wheels")
        handler = functools.partial(_QuietHandler, directory=str(workdir / "www"))
        server = ThreadingHTTPServer((pool.gateway, 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base_url = f"http://{pool.gateway}:{server.server_address[1]}"
        pool.start(specs)
        for host in pool.hosts.values():
            standin_images.write(host.root / "etc/flashfleet-test")
        if "dlami" in pool.hosts:
            _install_dlami_driver(pool, repo)
        # FLASHFLEET_TEST_RUNS_DIR keeps the event logs of every run (CI artifacts, debugging)
        runs = Path(os.environ.get("FLASHFLEET_TEST_RUNS_DIR", workdir / "runs"))
        yield Lab(pool, repo, base_url, hub, hub.start(pool.gateway), runs, groups or dict(GROUP_OF))
    finally:
        hub.stop()
        if server is not None:
            server.shutdown()
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    with open_lab(SPECS) as opened:
        yield opened
