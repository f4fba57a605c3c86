"""A test stack on booted test hosts, driven by the real Pulumi engine.

The hosts, vendor apt repository, Hub and stand-in images are those of tests/roles (so the
whole of site.yml runs: prepare, Mooncake, serve, verify); the Pulumi project is this
checkout's Pulumi.yaml and __main__.py beside a stacks/ directory of its own; the state is a
local file backend. The hosts run the real Docker engine (Debian's docker.io, installed from
Docker's package names by the container_runtime role) with the stand-in SGLang base image
imported under its pinned name (tests/hosts/engine_images.py); the serving units run their
containers on it through files/sandbox-docker, which lowers `--ulimit memlock=-1` to what this
sandbox grants and changes nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hosts.harness import LOGIN_USER, HostPool
from roles.conftest import Lab
from roles.test_preflight import SMALL_SIZES

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools" / "bin"
HERE = Path(__file__).parent
PASSPHRASE = "e2e-passphrase-not-a-secret"
SANDBOX_DOCKER = "/usr/local/lib/flashfleet-test/docker"


def pulumi_cli() -> str | None:
    return shutil.which("pulumi", path=f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}")


def pulumi_env(workdir: Path, project: Path) -> dict[str, str]:
    """The CLI on PATH, a local file backend and home under `workdir`, no update checks."""
    cli = pulumi_cli()
    assert cli is not None
    return {
        **os.environ,
        "PATH": f"{Path(cli).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(workdir / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{workdir / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "FLASHFLEET_PULUMI_PROJECT": str(project),
        "FLASHFLEET_RUNS_DIR": str(workdir / "runs"),
    }


def write_program(project: Path) -> None:
    """This checkout's Pulumi project (Pulumi.yaml, __main__.py) in `project`, stacks/ beside it."""
    (project / "stacks").mkdir(parents=True, exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, project / name)


def install_sandbox_docker(root: Path) -> None:
    """files/sandbox-docker on the host, at SANDBOX_DOCKER (the serve role's `sglang_serve_docker`)."""
    target = root / SANDBOX_DOCKER.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "files/sandbox-docker", target)
    target.chmod(0o755)


def lab_site(lab: Lab, docker_version: str) -> dict[str, Any]:
    """The stack's site section that points the roles at the lab: its repositories, wheels and Hub."""
    base = lab.base_url
    return {
        "apt": {
            "cuda": f"{base}/cuda/repos",
            "docker": f"{base}/docker/linux",
            "nvidiaContainer": f"{base}/libnvidia-container",
            "dockerVersion": docker_version,
        },
        "hub": {"endpoint": lab.hub_url, "tokenOverHttp": True},  # the stand-in Hub is plain http
        "pip": {"findLinks": f"{base}/wheels/", "trustedHost": lab.pool.gateway},
        "containerCli": SANDBOX_DOCKER,
        # a bound, not a speed target: a container on a test host's dockerd can take over a
        # minute to start while the rest of the suite shares the two cores
        "readiness": {"timeoutSeconds": 300, "pollSeconds": 1},
        "diskCheck": {
            "imageGb": SMALL_SIZES["preflight_image_gb"],
            "weightsGb": SMALL_SIZES["preflight_weights_gb"],
            "marginGb": SMALL_SIZES["preflight_disk_margin_gb"],
        },
    }


def stack_spec(
    hosts: dict[str, str], options: dict[str, Any], repository: str, derived: bool = False
) -> dict[str, Any]:
    """Existing hosts as a user lists them: a cloud-like login (sudo for root) and each host's
    own SSH host key pinned, so the engine's bring-up checks the keys it sends secrets to. The
    image comes from `repository` (a private registry), and the stack must be locked; or, with
    `derived`, the nodes build and run the derived image on the faithful base (its build's apt
    and pip come from the test network's archive, which `flashfleet lock` cannot snapshot: the
    stack is not locked)."""
    if derived:
        image = {"repository": repository, "version": "v0.5.23", "derived": True}
        return {**_stack_spec(hosts, options, image), "description": "e2e: the derived image"}
    # the base image: the derived build (above) needs the faithful base, imported on one host
    return {**_stack_spec(hosts, options, {"repository": repository, "version": "v0.5.23", "derived": False}),
            # `flashfleet lock` pins the weights' commit and the image's digest; nothing floats
            "lock": "required"}  # fmt: skip


def _stack_spec(hosts: dict[str, str], options: dict[str, Any], image: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": "e2e: two existing H200 hosts", "hardware": "h200", "strategy": "low-latency",
        "topology": "unified", "options": options, "ttl": "8h",
        # the gate a benchmark of this stack must pass to earn its own badge (flashfleet.bench.evidence)
        "bench": {"thresholds": {"chat-1k1k": {"min_success_ratio": 1.0, "min_output_throughput": 1.0}}},
        "image": image,
        "nodes": {"count": len(hosts), "source": {"kind": "existing", "hosts": [
            {"address": a, "sshUser": LOGIN_USER, "hostKeys": [key], "gpus": {"model": "h200", "count": 8},
             "hostMemoryGib": 16} for a, key in hosts.items()]}},
    }  # fmt: skip


@dataclass
class Engine:
    """One Pulumi project directory, backend and environment; `pulumi(...)` runs the CLI."""

    workdir: Path
    pool: HostPool
    site: dict[str, Any]
    repository: str  # the image's, in the test network's registry
    stack: str = "e2e"
    derived: bool = False  # the nodes build the derived image (stack_spec)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def project(self) -> Path:
        return self.workdir / "project"

    @property
    def stack_file(self) -> Path:
        return self.project / "stacks" / f"Pulumi.{self.stack}.yaml"

    def env(self) -> dict[str, str]:
        return {
            **pulumi_env(self.workdir, self.project),
            # How the controller reaches the test hosts (a user's ssh config would say this).
            "ANSIBLE_PRIVATE_KEY_FILE": str(self.pool.key),
            # No StrictHostKeyChecking=no here: flashfleet pins each host's listed key itself.
            "ANSIBLE_SSH_COMMON_ARGS": "-o LogLevel=ERROR",
        }

    def write_project(self, addresses: list[str], options: dict[str, Any]) -> None:
        write_program(self.project)
        (self.workdir / "state").mkdir(exist_ok=True)  # the file backend does not create it
        self.write_stack(addresses, options)

    def write_stack(self, addresses: list[str], options: dict[str, Any]) -> None:
        """The stack file, keeping what `pulumi config set --secret` added (salt, hfToken)."""
        doc: dict[str, Any] = {}
        if self.stack_file.exists():
            doc = yaml.safe_load(self.stack_file.read_text()) or {}
        config = doc.setdefault("config", {})
        by_address = {host.address: name for name, host in self.pool.hosts.items()}
        keys = {a: self.pool.ssh(by_address[a], "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.strip()
                for a in addresses}  # fmt: skip
        config["flashfleet:stack"] = {
            **stack_spec(keys, options, self.repository, self.derived),
            "site": self.site,
        }
        self.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def run(
        self, *argv: str, timed: str | None = None, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        start = time.monotonic()
        done = subprocess.run(
            list(argv), check=False, cwd=self.project, env={**self.env(), **(env or {})}, text=True,
            capture_output=True, timeout=1800,
        )  # fmt: skip
        if timed:
            self.timings[timed] = time.monotonic() - start
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: rc {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def pulumi(
        self, *args: str, timed: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run("pulumi", *args, "--stack", self.stack, "--non-interactive", timed=timed, check=check)

    def flashfleet(
        self, *args: str, timed: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        python = REPO / ".venv" / "bin" / "python"
        return self.run(str(python), "-m", "flashfleet", *args, timed=timed, check=False, env=env)

    def export(self) -> str:
        return self.pulumi("stack", "export").stdout

    def preview_steps(self) -> dict[str, list[str]]:
        """`pulumi preview --json`: {operation: [resource names]} of the steps it would take."""
        out = json.loads(self.pulumi("preview", "--json", "--diff").stdout)
        steps: dict[str, list[str]] = {}
        for step in out.get("steps", []):
            steps.setdefault(step["op"], []).append(step["urn"].rsplit("::", 1)[-1])
        return steps
