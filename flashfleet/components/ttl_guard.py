"""The cloud-side TTL guard: user data that makes an EC2 node end itself at its deadline.

Why on the node and not an EventBridge Scheduler: it needs no extra IAM role, schedule or
permission to terminate instances, and it keeps working when the controller that ran
``pulumi up`` is gone. The launch template sets instance-initiated shutdown to *terminate*,
so ``shutdown -h`` ends billing. The deadline is read from the instance's own
``flashfleet:expires-at`` tag through IMDSv2 (instance metadata tags enabled), never baked into
the user data: a later ``pulumi up`` moves the deadline by updating a tag in place, without
replacing the node. The last deadline read is kept on disk, so a metadata outage cannot
disarm it. ``flashfleet sweep`` (tags, from outside) is the second line.
"""

from __future__ import annotations

import base64

from flashfleet.components.tags import EXPIRES_TAG

_GUARD = r"""#!/bin/bash
# flashfleet TTL guard: shut down (EC2 terminates) once flashfleet:expires-at has passed.
set -u
cache=/var/lib/flashfleet/expires-at
imds=http://169.254.169.254/latest
if token=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/api/token") &&
   value=$(curl -sf -m 5 -H "X-aws-ec2-metadata-token: $token" "$imds/meta-data/tags/instance/__TAG__") &&
   [ -n "$value" ]; then
  echo "$value" > "$cache"
fi
[ -s "$cache" ] || exit 0
deadline=$(date -d "$(cat "$cache")" +%s) || exit 0
if [ "$(date +%s)" -ge "$deadline" ]; then
  logger -t flashfleet-ttl "deadline $(cat "$cache") passed: shutting down"
  shutdown -h now
fi
"""

_UNITS = r"""[Unit]
Description=flashfleet TTL guard (terminate this node after its flashfleet:expires-at tag)

[Service]
Type=oneshot
ExecStart=/usr/local/lib/flashfleet/ttl-guard
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


def user_data_script() -> str:
    guard = _GUARD.replace("__TAG__", EXPIRES_TAG)
    return "\n".join(
        [
            "#!/bin/bash",
            "set -euo pipefail",
            "install -d -m 755 /usr/local/lib/flashfleet /var/lib/flashfleet",
            "cat > /usr/local/lib/flashfleet/ttl-guard <<'GUARD'",
            guard.rstrip("\n"),
            "GUARD",
            "chmod 755 /usr/local/lib/flashfleet/ttl-guard",
            "cat > /etc/systemd/system/flashfleet-ttl-guard.service <<'UNIT'",
            _UNITS.rstrip("\n"),
            "UNIT",
            "cat > /etc/systemd/system/flashfleet-ttl-guard.timer <<'UNIT'",
            _TIMER.rstrip("\n"),
            "UNIT",
            "systemctl daemon-reload",
            "systemctl enable --now flashfleet-ttl-guard.timer",
            "",
        ]
    )


def user_data_base64() -> str:
    return base64.b64encode(user_data_script().encode()).decode()
