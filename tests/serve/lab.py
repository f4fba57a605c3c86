"""Test hosts for the serving and Mooncake roles: booted systemd hosts (tests/hosts/harness.py), the
Debian packages and wheels of scripts/setup.d/30-mooncake.sh served to them from the controller,
and inventories built by flashfleet.inventory from a test stack.

Each host runs the real Docker engine (Debian's docker.io of scripts/setup.d/25-docker-engine.sh,
with the stand-in NVIDIA prestart hook so that `--gpus` is granted against the host's simulated
GPUs) and holds the stand-in SGLang image (tests/hosts/engine_images.py: the OpenAI-compatible
stand-in server, the real router, and Mooncake's store client), tagged with every image name
the stacks' launches use. The serving units run `docker run` as rendered, through
tests/e2e/files/sandbox-docker, which lowers `--ulimit memlock=-1` to what this sandbox grants
and changes nothing else. The stand-in reads its knobs (load_seconds, image_mode, ...) from the
model cache volume every server container mounts: a file the test changes while it runs."""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hosts.aptrepo import ENGINE_DEBS
from hosts.engine_images import image_tarball, load_image, stop_engines
from hosts.harness import CACHE, LOGIN_USER, HostPool, HostSpec
from roles.hardware import H200, NVIDIA_DEVICES

from flashfleet.bringup.playbook_run import Progress, RunResult, run_playbook
from flashfleet.inventory import build_inventory
from flashfleet.planning import StackPlan, parse_spec, resolve_spec

HERE = Path(__file__).parent
MOONCAKE_CACHE = CACHE / "mooncake"
STANDIN_HOOK = HERE.parent / "hosts/standin/nvidia-container-runtime-hook"
SANDBOX_DOCKER = "/usr/local/lib/flashfleet-test/docker"  # tests/e2e/files/sandbox-docker
IMAGE = "flashfleet-test/standin:serve"  # imported once per host; the launches' names are its tags
MODEL_CACHE = "/opt/flashfleet/hf-cache"  # flashfleet.launch's default, mounted into every server
KNOBS = ".flashfleet-test/standin.json"  # under the model cache, on the host and in the container
IB_DEVICES = ("/dev/infiniband/uverbs0",)  # the Mooncake (RDMA) stacks pass --device /dev/infiniband
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
    engine: bool = True  # the real Docker engine serves (else no container runs on the hosts)
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
        if self.engine:
            self.tag_images(merged)
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
            extravars={**self._docker(), "mooncake_wheels_dir": str(MOONCAKE_CACHE / "wheels"), **(extravars or {})},
            hf_token=token, api_key=api_key, tags=tags, on_progress=self.progress.append,
            reconverge=reconverge,
        )  # fmt: skip

    def _docker(self) -> dict[str, str]:
        return {"sglang_serve_docker": SANDBOX_DOCKER} if self.engine else {}

    def use_archive(self, host: str) -> None:
        """`apt_url` (the packages of 30-mooncake.sh) becomes `host`'s package source: it stands
        for the distribution archive a real node has."""
        self.ssh(
            host,
            f"echo 'deb [trusted=yes] {self.apt_url}/ ./' >/etc/apt/sources.list.d/local.list"
            " && apt-get update -qq",
        )

    def set_knobs(self, host: str, knobs: dict[str, Any]) -> None:
        """The stand-in's knobs on `host`: read per request, by containers started before too."""
        path = self.pool.hosts[host].root / MODEL_CACHE.lstrip("/") / KNOBS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(knobs))

    def tag_images(self, inventory: dict[str, Any]) -> None:
        """Every image name the inventory's launches use becomes a tag of the stand-in image on
        the host that runs them (what the sglang_image role would have built or pulled)."""
        by_address = {h.address: name for name, h in self.pool.hosts.items()}
        for facts in inventory["all"]["hosts"].values():
            images = sorted({launch["image"] for launch in facts["flashfleet_processes"]})
            host = by_address[facts["ansible_host"]]
            self.ssh(host, " && ".join(f"docker tag {IMAGE} {image}" for image in images))

    def containers(self, host: str) -> list[dict[str, Any]]:
        """`docker inspect` of every running container on `host`: Docker's own record."""
        ids = self.ssh(host, "docker ps -q").split()
        return json.loads(self.ssh(host, f"docker inspect {' '.join(ids)}")) if ids else []

    def starts(self, host: str, name: str, event: str = "start") -> list[float]:
        """When Docker started each container named `name` on `host` (its event log: a restart
        under `--rm` leaves no container behind, but its start event stays); `event="die"`: when
        each one ended."""
        shown = self.ssh(
            host,
            'docker events --since 0 --until "$(date +%s.%N)" --filter type=container'
            f" --filter event={event} --format '{{{{.Actor.Attributes.name}}}} {{{{.TimeNano}}}}'",
        )
        return [int(t) / 1e9 for n, t in (line.split() for line in shown.splitlines()) if n == name]

    def explain(self, result: RunResult) -> str:
        return "\n".join([result.summary(), *(str(p) for p in self.progress)])

    def ssh(self, host: str, command: str, check: bool = True) -> str:
        done = self.pool.ssh(host, command, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{host}: {command}: rc {done.returncode}\n{done.stdout}{done.stderr}")
        return done.stdout


def _install_engine(lab: ServeLab, host: str, tarball: Path) -> None:
    """The real engine on `host` from the cached debs (what the container_runtime role installs,
    tested in tests/roles and tests/engine), the stand-in hook on dockerd's PATH before dockerd
    first starts (it looks for the hook once, at start), sandbox-docker, and the image."""
    root = lab.pool.hosts[host].root
    shutil.copy(STANDIN_HOOK, root / "usr/local/bin/nvidia-container-runtime-hook")
    wrapper = root / SANDBOX_DOCKER.lstrip("/")
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE.parent / "e2e/files/sandbox-docker", wrapper)
    debs = root / "var/tmp/engine-debs"  # where `_apt` can read them
    debs.mkdir(parents=True)
    for deb in ENGINE_DEBS.glob("*.deb"):
        shutil.copy(deb, debs)
    lab.ssh(host, "apt-get install -y -qq --no-install-recommends /var/tmp/engine-debs/*.deb >/dev/null"
                  " && rm -r /var/tmp/engine-debs")  # fmt: skip
    load_image(
        lab.pool, host, tarball, IMAGE, env={"FLASHFLEET_TEST_KNOBS": f"/root/.cache/huggingface/{KNOBS}"}
    )


@contextmanager
def serve_lab(names: Sequence[str], engine: bool = True) -> Iterator[ServeLab]:
    """Boots the hosts; each gets the flat apt repository of 30-mooncake.sh as its package source
    and, with `engine`, the real Docker engine and the stand-in image (`_install_engine`)."""
    if not (MOONCAKE_CACHE / ".ok").exists():
        raise RuntimeError(f"{MOONCAKE_CACHE} missing: run scripts/setup.d/30-mooncake.sh")
    if engine and not (ENGINE_DEBS / ".ok").exists():
        raise RuntimeError(f"{ENGINE_DEBS} missing: run scripts/setup.d/25-docker-engine.sh")
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-serve-", dir="/var/tmp"))
    pool = HostPool(workdir / "hosts")
    server: ThreadingHTTPServer | None = None
    try:
        handler = functools.partial(_QuietHandler, directory=str(MOONCAKE_CACHE / "debs"))
        server = ThreadingHTTPServer((pool.gateway, 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        apt_url = f"http://{pool.gateway}:{server.server_address[1]}"
        specs = [HostSpec(n, H200, NVIDIA_DEVICES + IB_DEVICES, container_engine=engine) for n in names]
        pool.start(specs)
        lab = ServeLab(pool, apt_url, workdir / "runs", engine=engine)
        for name in names:
            lab.use_archive(name)
        if engine:
            tarball = image_tarball(workdir / "image.tar", mooncake=MOONCAKE_CACHE)
            with ThreadPoolExecutor(len(names)) as pool_of_hosts:
                list(pool_of_hosts.map(lambda name: _install_engine(lab, name, tarball), names))
            tarball.unlink()
        yield lab
    finally:
        if server is not None:
            server.shutdown()
        if engine:
            stop_engines(pool, pool.hosts)
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)
