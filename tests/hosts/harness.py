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
# How Ansible logs in, as on a cloud node (the Deep Learning AMI's `ubuntu`): a non-root user
# with passwordless sudo, so that every task needing root must ask for it (`become`).
LOGIN_USER = "ubuntu"
LOGIN_UID = 1000

# nspawn mounts the cgroup v1 controllers read-only; containerd and runc create cgroups in them.
# A plain `remount,rw` says "busy"; a bind remount of each controller works. Test hosts only:
# a real node's engine owns its cgroups.
CGROUP_RW_UNIT = """\
[Unit]
Description=Writable cgroup v1 controllers for the container engine (test host)
DefaultDependencies=no
Before=sysinit.target containerd.service docker.service
ConditionPathIsDirectory=/sys/fs/cgroup/memory

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for d in /sys/fs/cgroup/*/; do [ -L "$${d%%/}" ] && continue; \\
  case "$d" in */systemd/|*/unified/) ;; *) mount -o remount,bind,rw "$d" "$d" || exit 1;; esac; done'

[Install]
WantedBy=sysinit.target
"""


@dataclass(frozen=True)
class HostSpec:
    name: str
    hardware: dict[str, object] = field(default_factory=dict)  # read by stand-in nvidia-smi/amd-smi
    devices: tuple[str, ...] = ()  # device nodes the GPUs would create (/dev/nvidia0, /dev/kfd)
    small_disk: tuple[str, str] | None = None  # (mount point, size) of a tiny real filesystem
    container_engine: bool = False  # lets a real dockerd run inside (see CGROUP_RW_UNIT)
    block_devices: tuple[str, ...] = ()  # host block devices (a loop device) the host sees as disks


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
        if spec.container_engine:
            # nspawn keeps /proc/sys read-only inside, and dockerd refuses to start unless it
            # can switch forwarding on (it writes only when off): switched on from outside.
            sh("ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        root = self.workdir / spec.name
        sh("cp", "-a", str(BASE_ROOTFS), str(root))
        self._personalise(root, spec)
        argv = [
            "systemd-nspawn", "-q", "-D", str(root), "-M", spec.name, "--boot",
            "--register=no", "--keep-unit", "--console=passive",
            f"--network-namespace-path=/run/netns/{netns}",
        ]  # fmt: skip
        argv += [f"--bind=/dev/null:{dev}" for dev in spec.devices]
        argv += [f"--bind={dev}" for dev in spec.block_devices]
        if spec.container_engine:
            # iptables and the container sandbox need NET_ADMIN (not granted with a network
            # namespace path), `--cap-add IPC_LOCK` (RDMA launches) needs it in the machine's
            # bounding set; runc joins a session keyring (blocked by nspawn's filter).
            argv += ["--capability=CAP_NET_ADMIN,CAP_IPC_LOCK", "--system-call-filter=@keyring"]
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
        # root's key serves the tests' own probes (`ssh()`); Ansible logs in as LOGIN_USER.
        self._authorize(root / "root", 0)
        self._add_login_user(root)
        if spec.container_engine:
            units = root / "etc/systemd/system"
            (units / "flashfleet-test-cgroup-rw.service").write_text(CGROUP_RW_UNIT)
            wants = units / "sysinit.target.wants"
            wants.mkdir(exist_ok=True)
            (wants / "flashfleet-test-cgroup-rw.service").symlink_to(
                "/etc/systemd/system/flashfleet-test-cgroup-rw.service"
            )
        hardware = root / HARDWARE_FILE
        hardware.parent.mkdir(parents=True, exist_ok=True)
        hardware.write_text(json.dumps(spec.hardware, indent=2))

    def _authorize(self, home: Path, uid: int) -> None:
        ssh_dir = home / ".ssh"
        ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        keys = ssh_dir / "authorized_keys"
        keys.write_text(self.key.with_suffix(".pub").read_text())
        keys.chmod(0o600)
        for path in (home, ssh_dir, keys):
            os.chown(path, uid, uid)

    def _add_login_user(self, root: Path) -> None:
        """What cloud-init does for the image's default user: an account without a password
        (key login only), its group, and sudo without a password."""
        user, uid = LOGIN_USER, LOGIN_UID
        entries = {
            "etc/passwd": f"{user}:x:{uid}:{uid}:{user}:/home/{user}:/bin/bash",
            "etc/group": f"{user}:x:{uid}:",
            "etc/shadow": f"{user}:*:20000:0:99999:7:::",
        }
        for rel, line in entries.items():
            with (root / rel).open("a") as f:
                f.write(line + "\n")
        sudoers = root / "etc/sudoers.d/90-cloud-init-users"
        sudoers.write_text(f"{user} ALL=(ALL) NOPASSWD:ALL\n")
        sudoers.chmod(0o440)
        home = root / "home" / user
        home.mkdir(mode=0o755, parents=True)
        self._authorize(home, uid)

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
                console = (self.workdir / f"{host.name}.console.log").read_text(errors="replace")
                raise RuntimeError(f"{host.name}: nspawn exited:\n{console[-2000:]}")
            probe = self.ssh(host.name, "systemctl is-system-running --wait", check=False)
            if probe.stdout.strip() in {"running", "degraded"}:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{host.name} at {host.address} did not boot in time")

    def inventory_host(self, host: str) -> dict[str, object]:
        """How Ansible reaches one host (the part of the inventory the harness owns)."""
        return {
            "ansible_host": self.hosts[host].address,
            "ansible_user": LOGIN_USER,
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            "ansible_python_interpreter": "/usr/bin/python3",
        }

    def cpu_seconds(self, host: str) -> float:
        """CPU seconds `host` has used so far: its nspawn process and every process under it.

        The hosts share one cgroup (nspawn runs with --keep-unit and --register=no, so every
        test host of this machine lands in the same `payload` cgroup), so this sums the process
        tree instead: each live process's own time plus that of the children it has reaped
        (the host's init reaps its orphans, so exited processes stay counted)."""
        return tree_cpu_seconds(self.hosts[host].process.pid)

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


def process_cpu() -> dict[int, tuple[int, float]]:
    """Every live process: pid -> (parent pid, CPU seconds of its own and of its reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone since the listing
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # after the command: state, ppid, ..., utime (11), stime, cutime, cstime (14)
        table[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick)
    return table


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root` and all its descendants (live, or reaped by one of them)."""
    table = process_cpu()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += table[pid][1] if pid in table else 0.0
        todo += children.get(pid, [])
    return total


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
