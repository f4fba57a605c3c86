#!/usr/bin/python3
"""flashfleet TTL guard: runs on an EC2 node (systemd timer) and shuts it down (the launch
template makes shutdown terminate) once its deadline has passed. Standard library only.

The deadline, in order:
1. the instance's own ``flashfleet:expires-at`` tag (IMDSv2), when it is an absolute UTC time
   ``YYYY-MM-DDTHH:MM:SSZ``; it is validated BEFORE it is cached, so a bad value never
   replaces a good one;
2. the last valid tag value cached on disk (IMDS down, tags off, tag removed or malformed);
3. the fallback fixed at first boot: launch time + the stack's ttl (baked into the user data),
   so a node whose tag was never readable still ends.
With none of these (the state directory wiped), the node shuts down: a guard that cannot
know its deadline does not keep a GPU node billing.

The clock is not trusted blindly: "now" is the latest of the wall clock, the last time this
guard saw plus the uptime since (a clock set back cannot postpone the deadline), and the
instance's launch time from IMDS. Every degraded case is logged at priority crit
(journal, via the ``<2>`` prefix on stderr).

This file is rendered into the user data by ``flashfleet.components.ttl_guard``; the
constants between the markers are replaced there with the values from ``components.tags``.
"""

from __future__ import annotations  # Ubuntu 22.04 nodes run Python 3.10

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

# --- constants (rendered) ---
EXPIRES_TAG = "flashfleet:expires-at"
EXPIRY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
EXPIRY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
# --- end constants ---

CLOCK_SLACK_S = 300  # wall clock behind what we know by more than this: say so


def log(priority: int, message: str) -> None:
    # journald reads the <N> prefix as the syslog priority (2 crit, 4 warning, 6 info)
    print(f"<{priority}>flashfleet-ttl: {message}", file=sys.stderr, flush=True)


def parse(text: str) -> float | None:
    if not re.match(EXPIRY_PATTERN, text):
        return None
    try:
        return datetime.strptime(text, EXPIRY_FORMAT).replace(tzinfo=timezone.utc).timestamp()  # noqa: UP017 (3.10 nodes)
    except ValueError:  # 2026-02-30T...
        return None


def fmt(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(EXPIRY_FORMAT)  # noqa: UP017 (3.10 nodes)


class Imds:
    def __init__(self, base: str, timeout: float) -> None:
        self.base, self.timeout = base.rstrip("/"), timeout
        self.token: str | None = None

    def _open(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> str:
        req = urllib.request.Request(self.base + path, method=method, headers=headers or {})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return str(resp.read().decode())

    def get(self, path: str) -> str:
        """The value, or raises (urllib.error.HTTPError 404: not there)."""
        if self.token is None:
            self.token = self._open(
                "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
            )
        return self._open(path, headers={"X-aws-ec2-metadata-token": self.token})


def read_file(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def write_file(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)  # atomic: a crash never leaves half a deadline


def trusted_now(state: str, imds_launch: float | None, uptime: float, boot_id: str) -> float:
    wall = time.time()
    now = wall
    seen = read_file(os.path.join(state, "clock"))
    if seen:
        try:
            last_wall, last_uptime, last_boot = seen.split()
            estimate = float(last_wall) + (uptime - float(last_uptime) if last_boot == boot_id else 0.0)
            now = max(now, estimate)
        except ValueError:
            log(4, f"ignoring unreadable clock record {seen!r}")
    if imds_launch is not None:
        now = max(now, imds_launch)
    if now - wall > CLOCK_SLACK_S:
        log(2, f"the clock says {fmt(wall)} but it was already {fmt(now)}: it went back; using {fmt(now)}")
    write_file(os.path.join(state, "clock"), f"{now:.0f} {uptime:.0f} {boot_id}")
    return now


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="flashfleet TTL guard")
    p.add_argument("--imds", default="http://169.254.169.254")
    p.add_argument("--state", default="/var/lib/flashfleet")
    p.add_argument("--shutdown", default="shutdown -h now", help="command that ends this node")
    p.add_argument("--uptime-file", default="/proc/uptime")
    p.add_argument("--boot-id-file", default="/proc/sys/kernel/random/boot_id")
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args(argv)
    cache = os.path.join(a.state, "expires-at")
    uptime = float((read_file(a.uptime_file) or "0").split()[0])
    boot_id = read_file(a.boot_id_file) or "unknown"
    imds = Imds(a.imds, a.timeout)

    tag: str | None = None
    launch: float | None = None
    try:
        tag = imds.get(f"/latest/meta-data/tags/instance/{EXPIRES_TAG}").strip()
    except urllib.error.HTTPError as err:
        log(2, f"no {EXPIRES_TAG} tag (HTTP {err.code}: tag removed or instance metadata tags off)")
    except (OSError, ValueError) as err:
        log(2, f"instance metadata unreachable: {err}")
    if imds.token is not None:
        try:
            launch = parse(json.loads(imds.get("/latest/dynamic/instance-identity/document"))["pendingTime"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            log(4, f"launch time unreadable from the identity document: {err}")

    if tag is not None:
        if parse(tag) is not None:
            if read_file(cache) != tag:
                write_file(cache, tag)
        else:
            log(2, f"refusing {EXPIRES_TAG}={tag!r}: not an absolute UTC time like 2026-11-29T18:00:00Z")
            tag = None

    now = trusted_now(a.state, launch, uptime, boot_id)
    fallback_file = os.path.join(a.state, "fallback")
    if read_file(fallback_file) is None:
        # first run: fix the fallback once, from the launch time (or now) and the baked-in ttl
        ttl = read_file(os.path.join(a.state, "ttl-seconds"))
        if ttl is not None and ttl.isdigit():
            write_file(fallback_file, fmt((launch if launch is not None else now) + int(ttl)))

    deadline, source = None, ""
    cached = read_file(cache)
    if cached is not None and parse(cached) is not None:
        deadline, source = parse(cached), "tag" if tag is not None else "cached tag"
    else:
        fallback = read_file(fallback_file)
        if fallback is not None and parse(fallback) is not None:
            deadline, source = parse(fallback), "fallback fixed at launch"
            log(2, f"no valid {EXPIRES_TAG} ever read: using the deadline fixed at launch, {fallback}")

    if deadline is None:
        log(2, "no deadline at all (state wiped?): shutting down rather than billing forever")
    elif now < deadline:
        log(6, f"deadline {fmt(deadline)} ({source}): {int(deadline - now)} s left")
        return 0
    else:
        log(2, f"deadline {fmt(deadline)} ({source}) passed: shutting down")
    return subprocess.call(shlex.split(a.shutdown))


if __name__ == "__main__":
    sys.exit(main())
