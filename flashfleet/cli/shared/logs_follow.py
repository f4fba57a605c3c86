"""`flashfleet logs STACK --follow`: each serving container's journal, followed on every node
until Ctrl-C (like `sky logs -f`, `dstack logs -f`).

Ansible returns a task's output only when the task ends, so following needs its own SSH path:
one `ssh ... journalctl --follow` per container, with the connection a bring-up uses. Hosts that
pin `flashfleet_host_keys` are checked against them (`StrictHostKeyChecking=yes` and a private
known_hosts file, as `bringup.playbook_run.pin_host_keys` writes it); the login user, port, key
file and `ansible_ssh_common_args` come from the inventory, and a non-root user reads the journal
through `sudo -n`, as the playbook's `become` does. Nothing secret is on these command lines.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# Fail fast on a host that is down; notice a connection that dies while idle.
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15")
# What the project's ansible.cfg (host_key_checking = False) does for hosts that pin no key.
UNPINNED = ("-o", "StrictHostKeyChecking=no")


def journal_command(unit: str, lines: int, user: str | None) -> list[str]:
    argv = [
        "journalctl", f"--unit={unit}.service", f"--lines={lines}", "--follow",
        "--output=short-iso", "--no-pager",
    ]  # fmt: skip
    return argv if user == "root" else ["sudo", "-n", *argv]


def ssh_command(hvars: Mapping[str, Any], remote: Sequence[str]) -> list[str]:
    """The ssh argv that runs `remote` on the host `hvars` describes (after pinning)."""
    argv = ["ssh", *SSH_OPTIONS]
    common = shlex.split(str(hvars.get("ansible_ssh_common_args") or ""))
    if not any("stricthostkeychecking" in word.lower() for word in common):
        argv += UNPINNED
    argv += common
    if hvars.get("ansible_port"):
        argv += ["-p", str(hvars["ansible_port"])]
    if hvars.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(hvars["ansible_ssh_private_key_file"])]
    if hvars.get("ansible_user"):
        argv += ["-l", str(hvars["ansible_user"])]
    # one word for the remote shell, each part quoted: a unit name is never re-split there
    return [*argv, "--", str(hvars["ansible_host"]), shlex.join(remote)]


def follow_commands(
    inventory: Mapping[str, Any], hosts: Sequence[str], lines: int, known_hosts: Path
) -> list[tuple[str, list[str]]]:
    """(label, ssh argv) for each serving container of `hosts`, pinned as a bring-up pins them."""
    from flashfleet.bringup.playbook_run import pin_host_keys

    pinned = (pin_host_keys(inventory, known_hosts).get("all") or {}).get("hosts") or {}
    out = []
    for host in hosts:
        hvars = pinned[host]
        for proc in hvars.get("flashfleet_processes") or []:
            name = str(proc["container_name"])
            remote = journal_command(name, lines, hvars.get("ansible_user"))
            out.append((f"{host} {name}", ssh_command(hvars, remote)))
    return out


def _pump(label: str, stream: IO[str], lock: threading.Lock) -> None:
    for line in stream:
        with lock:
            sys.stdout.write(f"{label} | {line}")
            sys.stdout.flush()


def follow(inventory: Mapping[str, Any], hosts: Sequence[str], lines: int) -> int:
    """Follow until Ctrl-C (exit 0) or until every connection has ended (exit 1: each one's
    ending is said on stderr)."""
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="flashfleet-logs-") as tmp:  # owner-only, removed after
        commands = follow_commands(inventory, hosts, lines, Path(tmp) / "known_hosts")
        procs: list[tuple[str, subprocess.Popen[str]]] = []
        pumps = []
        try:
            for label, argv in commands:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, errors="replace", start_new_session=True,
                )  # fmt: skip
                procs.append((label, proc))
                assert proc.stdout is not None
                pump = threading.Thread(target=_pump, args=(label, proc.stdout, lock), daemon=True)
                pump.start()
                pumps.append(pump)
            for pump in pumps:
                while pump.is_alive():  # a timed join: Ctrl-C reaches this thread at once
                    pump.join(0.5)
            for label, proc in procs:
                print(f"flashfleet logs: {label}: ended (ssh exit {proc.wait()})", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            for _, proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for _, proc in procs:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
