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

Whatever its source, the deadline never passes launch time + ``MAX_LIFE_S`` (baked in: the
longest deadline the stack's spec allows), so a far-future tag (a typo, a skewed controller
clock) cannot keep a node alive; a tag that asks for more is logged at crit.

The clock is not trusted blindly: "now" is the latest of the wall clock, the last time this
guard saw plus the uptime since (a clock set back cannot postpone the deadline), and the
instance's launch time from IMDS. Every degraded case is logged at priority crit
(journal, via the ``<2>`` prefix on stderr).

Fails closed: the files under the state directory are an optimisation. Each write is best
effort (the directory is recreated when missing; a full disk or any other error is logged at
crit), and the decision is made from what was read in this run, never from a write having
worked. An unexpected error in the check falls back to the state files and the wall clock:
a passed (or unknown) deadline still shuts the node down. Exit status: 0 when the check ran
(deadline ahead, or shutdown requested and accepted); the shutdown command's status when it
failed (1 when it could not be run); 1 when the check failed and the deadline had not passed.

This file is rendered into the user data by ``flashfleet.components.ttl_guard``; the
constants between the markers are replaced there with the values decided in Python.
"""

from __future__ import annotations  # Ubuntu 22.04 nodes run Python 3.10

import argparse
import contextlib
import http.client
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
MAX_LIFE_S = 1209600
# --- end constants ---

CLOCK_SLACK_S = 300  # wall clock behind what we know by more than this: say so
CACHE, CLOCK, FALLBACK, TTL = "expires-at", "clock", "fallback", "ttl-seconds"  # state files
IMDS_ERRORS = (OSError, ValueError, http.client.HTTPException)  # URLError is an OSError


def log(priority: int, message: str) -> None:
    # journald reads the <N> prefix as the syslog priority (2 crit, 4 warning, 6 info)
    print(f"<{priority}>flashfleet-ttl: {message}", file=sys.stderr, flush=True)


def parse(text: str | None) -> float | None:
    if text is None or not re.match(EXPIRY_PATTERN, text):
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
    """The file's text, or None: a missing or unreadable state file is only a missing hint."""
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, ValueError):  # ValueError: not text (a corrupted file)
        return None


def write_file(path: str, text: str) -> bool:
    """Best effort, and atomic when it works (a crash never leaves half a deadline). Never
    raises: nothing the guard decides may depend on a write having worked."""
    tmp = path + ".tmp"
    try:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755, exist_ok=True)
            log(2, f"the state directory {folder} was missing: recreated it")
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
        return True
    except OSError as err:
        log(2, f"cannot write {path} ({err}): deciding without it")
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def read_uptime(path: str) -> float:
    try:
        return float((read_file(path) or "").split()[0])
    except (ValueError, IndexError):
        log(4, f"uptime unreadable from {path}: taking 0")
        return 0.0


def trusted_now(state: str, imds_launch: float | None, uptime: float, boot_id: str) -> float:
    wall = time.time()
    now = wall
    seen = read_file(os.path.join(state, CLOCK))
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
    write_file(os.path.join(state, CLOCK), f"{now:.0f} {uptime:.0f} {boot_id}")
    return now


def read_tag(imds: Imds) -> str | None:
    """The tag's value when it is a valid deadline, else None (logged)."""
    try:
        tag = imds.get(f"/latest/meta-data/tags/instance/{EXPIRES_TAG}").strip()
    except urllib.error.HTTPError as err:
        log(2, f"no {EXPIRES_TAG} tag (HTTP {err.code}: tag removed or instance metadata tags off)")
        return None
    except IMDS_ERRORS as err:
        log(2, f"instance metadata unreachable: {err}")
        return None
    if parse(tag) is None:
        log(2, f"refusing {EXPIRES_TAG}={tag!r}: not an absolute UTC time like 2026-11-29T18:00:00Z")
        return None
    return tag


def read_launch(imds: Imds) -> float | None:
    if imds.token is None:  # IMDS did not answer the tag request: do not wait on it twice
        return None
    try:
        return parse(json.loads(imds.get("/latest/dynamic/instance-identity/document"))["pendingTime"])
    except (*IMDS_ERRORS, KeyError, TypeError) as err:
        log(4, f"launch time unreadable from the identity document: {err}")
        return None


def capped(deadline: float, source: str, launch: float) -> tuple[float, str]:
    """No deadline passes launch + MAX_LIFE_S: `up` never writes one further."""
    cap = launch + MAX_LIFE_S
    if deadline <= cap:
        return deadline, source
    log(
        2,
        f"{EXPIRES_TAG} {fmt(deadline)} ({source}) is past launch + the longest life a node may have "
        f"({MAX_LIFE_S} s): using {fmt(cap)}",
    )
    return cap, f"{source}, capped at launch + {MAX_LIFE_S} s"


def shut_down(command: str) -> int:
    try:
        return subprocess.call(shlex.split(command))
    except (OSError, ValueError) as err:
        log(2, f"cannot run the shutdown command {command!r}: {err}")
        return 1


def check(a: argparse.Namespace) -> int:
    state = a.state
    uptime = read_uptime(a.uptime_file)
    boot_id = read_file(a.boot_id_file) or "unknown"
    imds = Imds(a.imds, a.timeout)
    tag = read_tag(imds)
    launch = read_launch(imds)
    if tag is not None and read_file(os.path.join(state, CACHE)) != tag:
        write_file(os.path.join(state, CACHE), tag)

    now = trusted_now(state, launch, uptime, boot_id)
    # without IMDS, the boot time: it stays put from check to check (the first check's time
    # would only do so if it could be written down)
    anchor = launch if launch is not None else now - uptime
    fallback = read_file(os.path.join(state, FALLBACK))
    if parse(fallback) is None:
        # first run (or the file lost): fix the fallback from the launch time and the baked-in ttl
        ttl = read_file(os.path.join(state, TTL))
        fallback = fmt(anchor + int(ttl)) if ttl is not None and ttl.isdigit() else None
        if fallback is not None:
            write_file(os.path.join(state, FALLBACK), fallback)

    # decided from what this run read, never from what it managed to write
    cached = tag if tag is not None else read_file(os.path.join(state, CACHE))
    deadline, source = parse(cached), "tag" if tag is not None else "cached tag"
    if deadline is None:
        deadline, source = parse(fallback), "fallback fixed at launch"
        if deadline is not None:
            log(2, f"no valid {EXPIRES_TAG} ever read: using the deadline fixed at launch, {fallback}")

    if deadline is None:
        log(2, "no deadline at all (state wiped?): shutting down rather than billing forever")
        return shut_down(a.shutdown)
    deadline, source = capped(deadline, source, anchor)
    if now < deadline:
        log(6, f"deadline {fmt(deadline)} ({source}): {int(deadline - now)} s left")
        return 0
    log(2, f"deadline {fmt(deadline)} ({source}) passed: shutting down")
    return shut_down(a.shutdown)


def last_resort(a: argparse.Namespace) -> int:
    """After an unexpected error: the state files and the wall clock alone, no IMDS, no writes."""
    try:
        files = [parse(read_file(os.path.join(a.state, name))) for name in (CACHE, FALLBACK)]
        deadline = next((d for d in files if d is not None), None)
        now = time.time()
        if deadline is not None:
            deadline = min(deadline, now - read_uptime(a.uptime_file) + MAX_LIFE_S)
            if now < deadline:
                log(2, f"deadline {fmt(deadline)} (state files) not passed: nothing done; next check retries")
                return 1
        log(2, "deadline passed or unknown: shutting down")
    except Exception as err:  # fail closed whatever went wrong
        log(2, f"the state files are unusable too ({type(err).__name__}: {err}): shutting down")
    return shut_down(a.shutdown)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="flashfleet TTL guard")
    p.add_argument("--imds", default="http://169.254.169.254")
    p.add_argument("--state", default="/var/lib/flashfleet")
    p.add_argument("--shutdown", default="shutdown -h now", help="command that ends this node")
    p.add_argument("--uptime-file", default="/proc/uptime")
    p.add_argument("--boot-id-file", default="/proc/sys/kernel/random/boot_id")
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args(argv)
    try:
        return check(a)
    except Exception as err:  # a bug must never mean "no shutdown"
        log(2, f"the check failed ({type(err).__name__}: {err}): judging by the state files alone")
        return last_resort(a)


if __name__ == "__main__":
    sys.exit(main())
