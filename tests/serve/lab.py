"""Test hosts for the serving and Mooncake roles: booted systemd hosts (the issue-6 harness), the
Debian packages and wheels of scripts/setup.d/30-mooncake.sh served to them from the controller,
and inventories built by flashfleet.inventory from a test stack."""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hosts.harness import CACHE, LOGIN_USER, HostPool, HostSpec
from hosts.router_site import copy_router_site

from flashfleet.bringup.playbook_run import Progress, RunResult, run_playbook
from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan, parse_spec, resolve_spec

HERE = Path(__file__).parent
MOONCAKE_CACHE = CACHE / "mooncake"
TOKEN = "hf_flashfleetSERVEtoken9876543210fedcba"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def make_stack(
    name: str,
    topology: str,
    hosts: Sequence[str],
    *,
    options: dict[str, Any] | None = None,
    mooncake: dict[str, Any] | None = None,
    strategy: str = "low-latency",
    serving: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
) -> StackPlan:
    """An existing-hosts H200 stack on the given addresses (what `configure --inventory` gets)."""
    spec = {
        "description": f"test {topology}", "hardware": "h200", "strategy": strategy,
        "topology": topology, "options": options or {}, "ttl": "8h",
        "image": {"version": "v0.5.23"},
        # the test hosts' keys are not listed in their stacks: the harness opts in, in so many words
        "nodes": {"count": len(hosts), "source": {"kind": "existing", "allowUnpinnedHostKeys": True, "hosts": [
            {"address": a, "sshUser": LOGIN_USER, "gpus": {"model": "h200", "count": 8},
             "hostMemoryGib": 2048} for a in hosts]}},
    }  # fmt: skip
    if mooncake:
        spec["mooncake"] = mooncake
    if serving:
        spec["serving"] = serving
    if cluster:
        spec["cluster"] = cluster
    has_api_key = (serving or {}).get("apiKey") == "required"  # the secret is set with it
    return resolve_spec(name, parse_spec(name, spec), region=None, has_hf_token=True, has_api_key=has_api_key)


@dataclass
class ServeLab:
    pool: HostPool
    apt_url: str
    runs: Path
    progress: list[Progress] = field(default_factory=list)
    _counter: int = 0

    def address(self, host: str) -> str:
        return self.pool.hosts[host].address

    def inventory(self, *stacks: tuple[StackPlan, Sequence[str]]) -> dict[str, Any]:
        """flashfleet.inventory's inventory for each (stack, pool hosts), merged, plus SSH access."""
        merged: dict[str, Any] = {"all": {"hosts": {}, "children": {}}}
        for bringup, hosts in stacks:
            addresses = [self.address(h) for h in hosts]
            inv = build_inventory(bringup, addresses, addresses)["all"]
            for node, pool_host in zip(bringup.nodes, hosts, strict=True):
                access = self.pool.inventory_host(pool_host)
                # the login user is the stack's (sshUser), not the harness's choice
                assert inv["hosts"][node.name]["ansible_user"] == access.pop("ansible_user")
                inv["hosts"][node.name].update(access)
            merged["all"]["hosts"].update(inv["hosts"])
            for group, members in inv["children"].items():
                merged["all"]["children"].setdefault(group, {"hosts": {}})["hosts"].update(members["hosts"])
        return merged

    def run(
        self,
        playbook: str,
        inventory: dict[str, Any],
        *,
        extravars: dict[str, Any] | None = None,
        tags: str | None = None,
        token: str | None = TOKEN,
        api_key: str | None = None,
        reconverge: bool = True,
    ) -> RunResult:
        self._counter += 1
        self.progress = []
        return run_playbook(
            playbook, inventory, run_dir=self.runs / f"{self._counter:03d}-{playbook}",
            extravars={"mooncake_wheels_dir": str(MOONCAKE_CACHE / "wheels"), **(extravars or {})},
            hf_token=token, api_key=api_key, tags=tags, on_progress=self.progress.append,
            reconverge=reconverge,
        )  # fmt: skip

    def use_archive(self, host: str) -> None:
        """`apt_url` (the packages of 30-mooncake.sh) becomes `host`'s package source: it stands
        for the distribution archive a real node has."""
        self.ssh(
            host,
            f"echo 'deb [trusted=yes] {self.apt_url}/ ./' >/etc/apt/sources.list.d/local.list"
            " && apt-get update -qq",
        )

    def explain(self, result: RunResult) -> str:
        return "\n".join([result.summary(), *(str(p) for p in self.progress)])

    def ssh(self, host: str, command: str, check: bool = True) -> str:
        done = self.pool.ssh(host, command, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{host}: {command}: rc {done.returncode}\n{done.stdout}{done.stderr}")
        return done.stdout


@contextmanager
def serve_lab(names: Sequence[str]) -> Iterator[ServeLab]:
    """Boots the hosts; each gets the flat apt repository of 30-mooncake.sh as its package source."""
    if not (MOONCAKE_CACHE / ".ok").exists():
        raise RuntimeError(f"{MOONCAKE_CACHE} missing: run scripts/setup.d/30-mooncake.sh")
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-serve-", dir="/var/tmp"))
    pool = HostPool(workdir / "hosts")
    server: ThreadingHTTPServer | None = None
    try:
        handler = functools.partial(_QuietHandler, directory=str(MOONCAKE_CACHE / "debs"))
        server = ThreadingHTTPServer((pool.gateway, 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        apt_url = f"http://{pool.gateway}:{server.server_address[1]}"
        pool.start([HostSpec(n) for n in names])
        lab = ServeLab(pool, apt_url, workdir / "runs")
        for name in names:
            lab.use_archive(name)
        yield lab
    finally:
        if server is not None:
            server.shutdown()
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)


def install_fake_docker(lab: ServeLab, host: str) -> None:
    """/usr/bin/docker on `host` becomes the recording fake that starts the OpenAI stand-in, or
    the real SGLang router for a router container (its packages copied onto the host)."""
    root = lab.pool.hosts[host].root
    (root / "usr/local/lib/fake-docker").mkdir(parents=True)
    copy_router_site(root / "usr/local/lib/fake-docker/sglang-router")
    (root / "usr/local/lib/fake-docker/standin_sglang.py").write_text(
        (HERE / "standin_sglang.py").read_text()
    )
    flags = HERE.parents[1] / "flashfleet/catalog/sglang_flags.txt"  # the stand-in parses its argv with it
    (root / "usr/local/lib/fake-docker" / flags.name).write_text(flags.read_text())
    (root / "usr/bin/docker").write_text((HERE / "fake_docker.py").read_text())
    (root / "usr/bin/docker").chmod(0o755)
