"""The TTL guard under real systemd: the user data runs on a booted test host (Debian, systemd,
journald), the units start the guard, its crit lines land in the journal as crit, and a passed
deadline really powers the machine off (the host's nspawn process ends).

The guard reaches the stand-in IMDS on the controller's bridge address through a drop-in that
only adds ``--imds`` (and, for the first checks, a fake shutdown); everything else is as on EC2.
"""

from __future__ import annotations

import base64
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from hosts.harness import BASE_ROOTFS, HostSpec, host_pool

from flashfleet.components.tags import EXPIRES_TAG, iso_utc
from flashfleet.components.ttl_guard import user_data_script
from flashfleet.stack.spec import MAX_TTL

from .imds import serve_imds

pytestmark = pytest.mark.skipif(
    not (BASE_ROOTFS / "usr/sbin/sshd").exists(), reason="test-host rootfs not built (scripts/setup.d)"
)

DROPIN = "/etc/systemd/system/flashfleet-ttl-guard.service.d/imds.conf"


def test_the_guard_logs_crit_and_powers_the_node_off() -> None:
    with host_pool([HostSpec("ttl")]) as pool, serve_imds(pool.gateway) as imds:

        def run(cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            return pool.ssh("ttl", cmd, check=check)

        script = base64.b64encode(user_data_script(8 * 3600, int(MAX_TTL.total_seconds())).encode()).decode()
        run(f"echo {script} | base64 -d > /root/user-data && bash /root/user-data")
        assert run("systemctl is-enabled flashfleet-ttl-guard.timer").stdout.strip() == "enabled"

        def dropin(shutdown: str | None) -> None:
            extra = f" --shutdown '{shutdown}'" if shutdown else ""
            run(
                f"mkdir -p {DROPIN.rsplit('/', 1)[0]} && printf '%s\\n' '[Service]' 'ExecStart=' "
                f"'ExecStart=/usr/local/lib/flashfleet/ttl-guard --imds {imds.url}{extra}' > {DROPIN} "
                "&& systemctl daemon-reload"
            )

        dropin("touch /run/ttl-fired")
        # a relative date: refused, logged at crit; the launch + ttl fallback keeps it armed
        imds.tags[EXPIRES_TAG] = "tomorrow"
        run("systemctl start flashfleet-ttl-guard.service")
        crit = run("journalctl -t flashfleet-ttl -p crit --no-pager -o cat").stdout
        assert f"refusing {EXPIRES_TAG}='tomorrow'" in crit
        assert "using the deadline fixed at launch" in crit
        assert run("test -e /run/ttl-fired", check=False).returncode != 0
        assert run("cat /var/lib/flashfleet/fallback").stdout.strip() == iso_utc(
            imds.launched + timedelta(hours=8)
        )
        # a valid deadline in the future: info, not crit
        imds.tags[EXPIRES_TAG] = iso_utc(datetime.now(UTC) + timedelta(hours=1))
        run("systemctl start flashfleet-ttl-guard.service")
        assert "s left" in run("journalctl -t flashfleet-ttl -p info --no-pager -o cat").stdout
        # passed: the real shutdown
        imds.tags[EXPIRES_TAG] = iso_utc(datetime.now(UTC) - timedelta(minutes=1))
        dropin(None)
        run("systemctl start --no-block flashfleet-ttl-guard.service")
        process = pool.hosts["ttl"].process
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert process.poll() is not None, "the node did not power off"
