#!/usr/bin/python3
"""Restarts this node's PD decode units once after a prefill they take KV from restarted.

SGLang's decode keeps what it learned from a prefill at its first room there and does not
re-bootstrap with a new process behind the same address: after a prefill's unplanned restart its
rooms fail until the decode restarts. This polls every prefill's /health; a run of failed polls
(down_polls in a row) is an outage, and when that prefill answers again, each decode unit that
has been active since before the outage began is restarted (systemctl try-restart), once. A decode
started during the outage (a planned update restarts the whole PD group) never met the old
prefill and is left alone, as is a stopped one.

Usage: pd-heal CONFIG.json  ({"prefills": [URL...], "units": [UNIT...], "poll_s", "down_polls",
"probe_timeout_s"}).
"""

import json
import subprocess
import sys
import time
import urllib.request


def healthy(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False


def active_since(unit: str) -> float | None:
    """When the unit last became active (CLOCK_MONOTONIC seconds, as time.monotonic), or None
    when it is not active now."""
    out = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,ActiveEnterTimestampMonotonic", unit],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if props.get("ActiveState") != "active":
        return None
    return int(props.get("ActiveEnterTimestampMonotonic") or 0) / 1e6


def heal(prefill: str, outage_began: float, units: list[str]) -> None:
    for unit in units:
        since = active_since(unit)
        if since is None or since >= outage_began:
            print(
                f"{prefill} is back; {unit} started after its outage began (or is stopped): left as it is",
                flush=True,
            )
            continue
        print(
            f"{prefill} restarted; restarting {unit}, which ran with the prefill's previous process",
            flush=True,
        )
        subprocess.run(["systemctl", "try-restart", unit], check=False)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    prefills, units = list(config["prefills"]), list(config["units"])
    poll_s, down_polls, timeout = (
        float(config["poll_s"]),
        int(config["down_polls"]),
        float(config["probe_timeout_s"]),
    )
    failed = dict.fromkeys(prefills, 0)  # failed polls in a row
    began: dict[str, float] = {}  # the outage's first failed poll (monotonic)
    print(f"watching {', '.join(prefills)} for {', '.join(units)}", flush=True)
    while True:
        for url in prefills:
            polled = time.monotonic()
            if healthy(url, timeout):
                if failed[url] >= down_polls:
                    heal(url, began[url], units)
                failed[url] = 0
                began.pop(url, None)
                continue
            if failed[url] == 0:
                began[url] = polled
            failed[url] += 1
            if failed[url] == down_polls:
                print(f"{url} is down (since {time.monotonic() - began[url]:.1f} s)", flush=True)
        time.sleep(poll_s)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: pd-heal CONFIG.json")
    main(sys.argv[1])
