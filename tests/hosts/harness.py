"""Starts and stops real systemd test hosts: one systemd-nspawn machine per network namespace.

Each host boots real systemd and sshd from a copy of the cached base rootfs built by
`scripts/setup.d/20-test-hosts.sh`, so services, handlers and idempotency are real. What a
cloud GPU node has and this machine cannot (GPUs, device nodes, a small NVMe) is described per
host by `HostSpec` and put in place at the lowest level we can: a hardware description file
read by the stand-in vendor tools, device nodes bind-mounted from /dev/null, a size-limited tmpfs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .network import Bridge, sh

CACHE = Path(os.environ.get("FLASHFLEET_TEST_HOSTS_CACHE", "/var/cache/flashfleet/test-hosts"))
BASE_ROOTFS = CACHE / "base-bookworm"
HARDWARE_FILE = "etc/flashfleet-test/hardware.json"


@dataclass(frozen=True)
class HostSpec:
    name: str
    hardware: dict[str, object] = field(default_factory=dict)  # read by stand-in nvidia-smi/amd-smi
    devices: tuple[str, ...] = ()  # device nodes the GPUs would create (/dev/nvidia0, /dev/kfd)
    small_disk: tuple[str, str] | None = None  # (mount point, size) of a tiny real filesystem


@dataclass
class TestHost:
    spec: HostSpec
    address: str
    root: Path
    process: subprocess.Popen[bytes]

    @property
    def name(self) -> str:
        return self.spec.name


class HostPool:
    """A bridge plus N booted hosts; `close()` (or the context manager) removes every trace."""

    def __init__(self, workdir: Path) -> None:
        if not (BASE_ROOTFS / "usr/sbin/sshd").exists():
            raise RuntimeError(f"{BASE_ROOTFS} missing: run scripts/setup.d/20-test-hosts.sh")
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.key = workdir / "id_ed25519"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        self.bridge = Bridge.create()
        self.hosts: dict[str, TestHost] = {}
        self._netns: list[str] = []

    @property
    def gateway(self) -> str:
        return self.bridge.gateway

    def start(self, specs: list[HostSpec], timeout: float = 120) -> None:
        for spec in specs:
            self.hosts[spec.name] = self._boot(spec, len(self.hosts))
        deadline = time.monotonic() + timeout
        for host in self.hosts.values():
            self._wait_ready(host, deadline)

    def _boot(self, spec: HostSpec, index: int) -> TestHost:
        netns = f"{self.bridge.name}-{spec.name}"
        self._netns.append(netns)  # before attach: a half-wired namespace is removed too
        address = self.bridge.attach(netns, index)
        root = self.workdir / spec.name
        sh("cp", "-a", str(BASE_ROOTFS), str(root))
        self._personalise(root, spec)
        argv = [
            "systemd-nspawn", "-q", "-D", str(root), "-M", spec.name, "--boot",
            "--register=no", "--keep-unit", "--console=passive",
            f"--network-namespace-path=/run/netns/{netns}",
        ]  # fmt: skip
        argv += [f"--bind=/dev/null:{dev}" for dev in spec.devices]
        if spec.small_disk:
            mount, size = spec.small_disk
            argv.append(f"--tmpfs={mount}:size={size},mode=0755")
        log = (self.workdir / f"{spec.name}.console.log").open("wb")
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        return TestHost(spec, address, root, process)

    def _personalise(self, root: Path, spec: HostSpec) -> None:
        (root / "etc/hostname").write_text(f"{spec.name}\n")
        (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {spec.name}\n")
        (root / "etc/resolv.conf").unlink(missing_ok=True)
        (root / "etc/resolv.conf").write_text("")
        # No route to any archive: the only package source is the one a role configures.
        (root / "etc/apt/sources.list").write_text("")
        ssh_dir = root / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        (ssh_dir / "authorized_keys").chmod(0o600)
        hardware = root / HARDWARE_FILE
        hardware.parent.mkdir(parents=True, exist_ok=True)
        hardware.write_text(json.dumps(spec.hardware, indent=2))

    def ssh(self, host: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", *self.ssh_options(), f"root@{self.hosts[host].address}", command],
            check=check, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def ssh_options(self) -> list[str]:
        return [
            "-i", str(self.key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=5", "-o", "BatchMode=yes",
        ]  # fmt: skip

    def _wait_ready(self, host: TestHost, deadline: float) -> None:
        while time.monotonic() < deadline:
            if host.process.poll() is not None:
                raise RuntimeError(f"{host.name}: nspawn exited, see {self.workdir}")
            probe = self.ssh(host.name, "systemctl is-system-running --wait", check=False)
            if probe.stdout.strip() in {"running", "degraded"}:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{host.name} at {host.address} did not boot in time")

    def inventory_host(self, host: str) -> dict[str, object]:
        """How Ansible reaches one host (the part of the inventory the harness owns)."""
        return {
            "ansible_host": self.hosts[host].address,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            "ansible_python_interpreter": "/usr/bin/python3",
        }

    def close(self) -> None:
        for host in self.hosts.values():
            if host.process.poll() is None:
                os.killpg(host.process.pid, signal.SIGTERM)
        for host in self.hosts.values():
            try:
                host.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(host.process.pid, signal.SIGKILL)
                host.process.wait()
        for netns in self._netns:
            sh("ip", "netns", "del", netns, check=False)
        self.bridge.destroy()
        for host in self.hosts.values():
            shutil.rmtree(host.root, ignore_errors=True)


@contextmanager
def host_pool(specs: list[HostSpec]) -> Iterator[HostPool]:
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-hosts-", dir="/var/tmp"))
    pool = HostPool(workdir)
    try:
        pool.start(specs)
        yield pool
    finally:
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)
