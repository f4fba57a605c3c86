"""The cloud-side TTL guard: user data that makes an EC2 node end itself at its deadline.

Why on the node and not an EventBridge Scheduler: it needs no extra IAM role, schedule or
permission to terminate instances, and it keeps working when the controller that ran
``pulumi up`` is gone. The launch template sets instance-initiated shutdown to *terminate*,
so ``shutdown -h`` ends billing. The guard itself (``ttl_guard_node.py``, run every 5 minutes by
a systemd timer) reads the instance's own ``flashfleet:expires-at`` tag through IMDSv2, so a
later ``pulumi up`` moves the deadline in place. What it does when the tag is missing, bad or
unreadable, and how it treats the clock, is in that file's docstring: in short it never
disarms, it falls back to launch time + the stack's ttl, baked in here, and it never lets a
deadline pass launch time + the longest life the spec allows, baked in here too.

The ttl is part of the user data, so changing a stack's ``ttl`` makes a new launch-template
version, and (like any template change) new nodes on the next ``up``; a new deadline for running
nodes comes from the tag alone.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from flashfleet.components.tags import EXPIRES_TAG, EXPIRY_FORMAT, EXPIRY_PATTERN

__all__ = ["EXPIRES_TAG", "guard_script", "user_data_base64", "user_data_script"]

GUARD_PATH = "/usr/local/lib/flashfleet/ttl-guard"
STATE_DIR = "/var/lib/flashfleet"

_UNIT = r"""[Unit]
Description=flashfleet TTL guard (terminate this node after its flashfleet:expires-at tag)

[Service]
Type=oneshot
ExecStart=/usr/local/lib/flashfleet/ttl-guard
# journalctl -t flashfleet-ttl; the guard's "<2>" line prefixes set each line's priority
SyslogIdentifier=flashfleet-ttl
SyslogLevelPrefix=yes
"""

_TIMER = r"""[Unit]
Description=Check the flashfleet TTL every 5 minutes

[Timer]
OnBootSec=1min
OnUnitActiveSec=5min
AccuracySec=30s

[Install]
WantedBy=timers.target
"""

_CONSTANTS = re.compile(r"# --- constants \(rendered\) ---\n.*?# --- end constants ---\n", re.S)


def guard_script(max_life_seconds: int) -> str:
    """The node's guard, its constants taken from ``components.tags`` (defined once) and the
    cap on its deadline (launch + ``max_life_seconds``) from the caller."""
    source = (Path(__file__).with_name("ttl_guard_node.py")).read_text()
    constants = "\n".join(
        [
            f"EXPIRES_TAG = {EXPIRES_TAG!r}",
            f"EXPIRY_FORMAT = {EXPIRY_FORMAT!r}",
            f"EXPIRY_PATTERN = {EXPIRY_PATTERN!r}",
            f"MAX_LIFE_S = {int(max_life_seconds)}",
            "",
        ]
    )
    rendered, count = _CONSTANTS.subn(lambda _: constants, source)
    if count != 1:
        raise RuntimeError("ttl_guard_node.py lost its constants block")
    return rendered


def user_data_script(ttl_seconds: int, max_life_seconds: int) -> str:
    """``ttl_seconds``: the fallback deadline's distance from launch; ``max_life_seconds``: the
    furthest from launch any deadline may be (a tag asking for more is capped)."""
    if ttl_seconds <= 0:
        raise ValueError("the TTL guard needs a positive ttl")
    if max_life_seconds < ttl_seconds:
        raise ValueError("the TTL guard's cap must not be shorter than its ttl")
    return "\n".join(
        [
            "#!/bin/bash",
            "set -euo pipefail",
            f"install -d -m 755 /usr/local/lib/flashfleet {STATE_DIR}",
            # the fallback deadline (launch + ttl) when no tag is ever readable
            f"echo {int(ttl_seconds)} > {STATE_DIR}/ttl-seconds",
            f"cat > {GUARD_PATH} <<'GUARD'",
            guard_script(max_life_seconds).rstrip("\n"),
            "GUARD",
            f"chmod 755 {GUARD_PATH}",
            "cat > /etc/systemd/system/flashfleet-ttl-guard.service <<'UNIT'",
            _UNIT.rstrip("\n"),
            "UNIT",
            "cat > /etc/systemd/system/flashfleet-ttl-guard.timer <<'UNIT'",
            _TIMER.rstrip("\n"),
            "UNIT",
            "systemctl daemon-reload",
            "systemctl enable --now flashfleet-ttl-guard.timer",
            "",
        ]
    )


def user_data_base64(ttl_seconds: int, max_life_seconds: int) -> str:
    return base64.b64encode(user_data_script(ttl_seconds, max_life_seconds).encode()).decode()
