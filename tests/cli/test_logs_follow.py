"""`flashfleet logs STACK --follow`, with `ssh` itself stood in for at the lowest boundary: a
script on PATH that records its argv, prints journal lines and then waits, as `journalctl
--follow` does. Ctrl-C ends the follow with exit 0, no traceback, and no ssh left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from flashfleet.cli.shared.logs_follow import follow_commands
from tests.cli.terminal import sigint_as_at_a_terminal

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
STAND_IN = """#!/bin/sh
# ssh, stood in for: record the argv, print the journal's lines, follow (wait) until killed
printf '%s\\n' "$@" > "$SSH_RECORD/$$.argv"
echo "line one of $$"
echo "line two of $$"
exec sleep 120
"""


def _inventory() -> dict[str, object]:
    def host(address: str, containers: list[str], **conn: object) -> dict[str, object]:
        return {
            "ansible_host": address,
            "flashfleet_node_index": int(address[-1]),
            "flashfleet_processes": [{"container_name": c} for c in containers],
            **conn,
        }

    return {
        "all": {
            "hosts": {
                "n0": host("10.0.0.0", ["flashfleet-server", "flashfleet-router"], ansible_user="ubuntu",
                           flashfleet_host_keys=[KEY], ansible_port=2222),
                "n1": host("10.0.0.1", ["flashfleet-server"], ansible_user="root",
                           ansible_ssh_private_key_file="/keys/id_ed25519"),
                "m2": host("10.0.0.2", []),  # serves nothing: not followed
            }
        }
    }  # fmt: skip


def test_commands_pin_keys_and_reach_each_container_as_a_bring_up_does(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    commands = dict(follow_commands(_inventory(), ["n0", "n1"], 20, known))
    assert list(commands) == ["n0 flashfleet-server", "n0 flashfleet-router", "n1 flashfleet-server"]
    pinned = commands["n0 flashfleet-router"]
    assert pinned[:1] == ["ssh"]
    assert "BatchMode=yes" in pinned
    assert "StrictHostKeyChecking=yes" in pinned
    assert f"UserKnownHostsFile={known}" in pinned
    assert "StrictHostKeyChecking=no" not in pinned
    assert known.read_text() == f"[10.0.0.0]:2222 {KEY}\n"  # the port as ssh looks it up
    assert pinned[pinned.index("-p") + 1] == "2222"
    assert pinned[pinned.index("-l") + 1] == "ubuntu"
    assert pinned[-2:] == [
        "10.0.0.0",
        "sudo -n journalctl --unit=flashfleet-router.service --lines=20 --follow --output=short-iso "
        "--no-pager",
    ]
    root = commands["n1 flashfleet-server"]
    # no key pinned: as the project's ansible.cfg treats such a host; root reads without sudo
    assert "StrictHostKeyChecking=no" in root
    assert root[root.index("-i") + 1] == "/keys/id_ed25519"
    assert root[-1].startswith("journalctl --unit=flashfleet-server.service")


def _wait_for(path: Path, lines: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(path.read_text().splitlines()) >= lines:
            return
        assert proc.poll() is None, path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"no {lines} lines in 60 s:\n{path.read_text()}")


def test_follow_prints_every_node_until_ctrl_c_then_exits_0(tmp_path: Path) -> None:
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    (bin_dir / "ssh").write_text(STAND_IN)
    (bin_dir / "ssh").chmod(0o755)
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(_inventory()))
    out, err = tmp_path / "out", tmp_path / "err"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SSH_RECORD": str(record)}
    argv = [sys.executable, "-m", "flashfleet", "logs", "t1", "--inventory", str(inv), "--follow"]
    with out.open("w") as stdout, err.open("w") as stderr:
        with sigint_as_at_a_terminal():
            proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env, text=True)
        try:
            _wait_for(out, 6, proc)  # two lines from each of three containers
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, err.read_text()
    assert "Traceback" not in err.read_text(), err.read_text()
    shown = out.read_text().splitlines()
    for label in ("n0 flashfleet-server", "n0 flashfleet-router", "n1 flashfleet-server"):
        assert sum(line.startswith(f"{label} | line ") for line in shown) == 2, shown
    assert not any(line.startswith("m2") for line in shown)
    pids = [int(p.stem) for p in record.glob("*.argv")]
    assert len(pids) == 3
    time.sleep(0.2)
    for pid in pids:  # each ssh was ended, not left following
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        with open(f"/proc/{pid}/stat") as stat:  # a zombie not yet reaped by init counts as ended
            assert stat.read().split()[2] == "Z", f"ssh {pid} still runs"


def test_follow_ends_with_exit_1_when_every_connection_ends(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text("#!/bin/sh\necho 'ssh: connect to host: Connection refused' >&2\nexit 255\n")
    (bin_dir / "ssh").chmod(0o755)
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(_inventory()))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "flashfleet", "logs", "t1", "--inventory", str(inv), "-f", "--node", "1"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "n1 flashfleet-server | ssh: connect to host: Connection refused" in proc.stdout
    assert "flashfleet logs: n1 flashfleet-server: ended (ssh exit 255)" in proc.stderr
    assert "Traceback" not in proc.stderr
