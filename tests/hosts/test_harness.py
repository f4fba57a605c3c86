"""The test-host harness itself: a host boots real systemd and sshd in its own namespace,
carries the simulated hardware, and leaves nothing behind when the pool closes."""

from __future__ import annotations

import json
import subprocess

from .harness import LOGIN_USER, HostSpec, host_pool
from .network import sh

SPEC = HostSpec(
    "probe",
    hardware={"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "memory_mib": 143771}]},
    devices=("/dev/nvidia0",),
    small_disk=("/mnt/nvme", "32M"),
)


def test_host_boots_systemd_with_its_hardware_and_is_removed_on_close() -> None:
    with host_pool([SPEC]) as pool:
        host = pool.hosts["probe"]
        assert pool.ssh("probe", "ps -p 1 -o comm=").stdout.strip() == "systemd"
        assert pool.ssh("probe", "systemctl is-active ssh").stdout.strip() == "active"
        assert pool.ssh("probe", "hostname").stdout.strip() == "probe"
        hardware = json.loads(pool.ssh("probe", "cat /etc/flashfleet-test/hardware.json").stdout)
        assert hardware == SPEC.hardware
        assert pool.ssh("probe", "test -c /dev/nvidia0 && echo char").stdout.strip() == "char"
        size = pool.ssh("probe", "df -B1M --output=size /mnt/nvme | tail -1").stdout.strip()
        assert size == "32"
        # the only route out leads to the controller's address on the private bridge
        route = pool.ssh("probe", "ip route show default").stdout
        assert route.startswith(f"default via {pool.gateway} dev eth0")
        assert host.address.startswith(pool.bridge.prefix + ".")
        # Ansible's login is a non-root user, as on a cloud node: root needs `sudo`
        login = [*pool.ssh_options(), f"{LOGIN_USER}@{host.address}"]
        assert pool.inventory_host("probe")["ansible_user"] == LOGIN_USER
        whoami = subprocess.run(["ssh", *login, "id -u; sudo -n id -u; touch /etc/x"],
                                check=False, capture_output=True, text=True)  # fmt: skip
        assert whoami.stdout.split() == ["1000", "0"], whoami
        assert "Permission denied" in whoami.stderr
        bridge, netns, root = pool.bridge.name, f"{pool.bridge.name}-probe", host.root
        # the bridge by its interface index: another suite's pool may take its free name at once
        ifindex = sh("ip", "-o", "link", "show", bridge).stdout.split(":", 1)[0]
    links = sh("ip", "-o", "link", "show").stdout
    assert not any(line.startswith(f"{ifindex}: {bridge}:") for line in links.splitlines()), links
    assert netns not in sh("ip", "netns", "list").stdout
    assert not root.exists()
    assert host.process.poll() is not None
    assert (
        subprocess.run(["pgrep", "-f", "--", f"-D {root}"], check=False, capture_output=True).returncode == 1
    )
