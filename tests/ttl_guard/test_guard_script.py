"""The TTL guard as the node runs it: the script is cut out of the real user data and run with
python3 against a stand-in IMDS on loopback (IMDSv2: a GET without the session token is refused,
as on EC2; tags can be turned off) and a fake shutdown command that records it ran.

Each case is one of issue 14's ways to disarm the guard: missing tag, tags off with nothing
cached, IMDS down on the first check, empty or malformed tag over a good cached deadline,
relative dates (`tomorrow`, `next year`), and a clock set back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flashfleet.components.tags import EXPIRES_TAG, iso_utc
from flashfleet.components.ttl_guard import user_data_script

from .imds import Imds, serve_imds

# The nodes run Ubuntu's python3 (3.10 on 22.04, 3.12 on 24.04): point this at one to try it.
GUARD_PYTHON = os.environ.get("FLASHFLEET_GUARD_PYTHON", sys.executable)


@pytest.fixture
def imds() -> Iterator[Imds]:
    with serve_imds("127.0.0.1") as state:
        yield state


def guard_from_user_data(ttl_seconds: int) -> tuple[str, str]:
    """(guard script, ttl-seconds value) exactly as the user data writes them on the node."""
    lines = user_data_script(ttl_seconds).splitlines()
    start = lines.index("cat > /usr/local/lib/flashfleet/ttl-guard <<'GUARD'") + 1
    script = "\n".join(lines[start : lines.index("GUARD", start)]) + "\n"
    (ttl_line,) = [ln for ln in lines if ln.endswith("> /var/lib/flashfleet/ttl-seconds")]
    return script, ttl_line.split()[1]


@dataclass
class Node:
    root: Path
    imds_url: str
    ttl_seconds: int = 8 * 3600
    uptime_s: float = 120.0

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def marker(self) -> Path:
        return self.root / "shut-down"

    def boot(self) -> None:
        """What the user data does at first boot."""
        script, ttl = guard_from_user_data(self.ttl_seconds)
        self.state.mkdir(parents=True, exist_ok=True)
        (self.root / "ttl-guard").write_text(script)
        (self.state / "ttl-seconds").write_text(ttl + "\n")
        (self.root / "boot_id").write_text("boot-1\n")

    def check(self) -> tuple[bool, str]:
        """One timer run: (did it shut down, its journal lines)."""
        (self.root / "uptime").write_text(f"{self.uptime_s:.2f} 10.00\n")
        argv = [
            sys.executable,
            str(self.root / "ttl-guard"),
            "--imds",
            self.imds_url,
            "--state",
            str(self.state),
        ]
        argv += ["--shutdown", f"touch {self.marker}", "--timeout", "2"]
        argv += ["--uptime-file", str(self.root / "uptime"), "--boot-id-file", str(self.root / "boot_id")]
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        fired = self.marker.exists()
        self.marker.unlink(missing_ok=True)
        return fired, proc.stderr

    def cached(self) -> str | None:
        path = self.state / "expires-at"
        return path.read_text().strip() if path.exists() else None


@pytest.fixture
def node(tmp_path: Path, imds: Imds) -> Node:
    n = Node(tmp_path, imds.url)
    n.boot()
    return n


def at(hours: float) -> str:
    return iso_utc(datetime.now(UTC) + timedelta(hours=hours))


CRIT = "<2>flashfleet-ttl: "


def test_a_valid_tag_is_cached_and_fires_once_passed(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    fired, log = node.check()
    assert not fired
    assert node.cached() == imds.tags[EXPIRES_TAG]
    assert "<6>flashfleet-ttl: deadline" in log
    assert CRIT not in log
    imds.tags[EXPIRES_TAG] = at(-0.1)  # a later `pulumi up` (or a shorter ttl) moved it
    fired, log = node.check()
    assert fired
    assert f"{CRIT}deadline {imds.tags[EXPIRES_TAG]} (tag) passed: shutting down" in log


@pytest.mark.parametrize("tags_enabled", [True, False], ids=["tag missing", "metadata tags off"])
def test_no_tag_and_nothing_cached_falls_back_to_launch_plus_ttl(
    node: Node, imds: Imds, tags_enabled: bool
) -> None:
    imds.tags_enabled = tags_enabled
    fired, log = node.check()
    assert not fired  # launched 2 minutes ago, ttl 8 h
    assert f"{CRIT}no {EXPIRES_TAG} tag" in log
    assert f"{CRIT}no valid {EXPIRES_TAG} ever read: using the deadline fixed at launch" in log
    assert (node.state / "fallback").read_text().strip() == iso_utc(imds.launched + timedelta(hours=8))
    imds.launched -= timedelta(hours=9)  # (the fallback is fixed: moving the launch changes nothing)
    assert not node.check()[0]
    (node.state / "fallback").write_text(at(-0.01) + "\n")  # ... until its time comes
    fired, log = node.check()
    assert fired
    assert "(fallback fixed at launch) passed: shutting down" in log


def test_imds_down_on_the_first_check_still_fires(tmp_path: Path) -> None:
    n = Node(tmp_path, "http://127.0.0.1:9", ttl_seconds=1)  # nothing listens on port 9
    n.boot()
    fired, log = n.check()
    assert not fired
    assert f"{CRIT}instance metadata unreachable" in log
    assert f"{CRIT}no valid {EXPIRES_TAG} ever read" in log
    time.sleep(1.5)
    n.uptime_s += 1.5
    assert n.check()[0]


@pytest.mark.parametrize(
    "bad", ["", "   ", "tomorrow", "next year", "2026-13-01T00:00:00Z", "2026-11-29 18:00"]
)
def test_a_bad_tag_never_overwrites_a_good_cached_deadline(node: Node, imds: Imds, bad: str) -> None:
    good = at(3)
    imds.tags[EXPIRES_TAG] = good
    assert not node.check()[0]
    imds.tags[EXPIRES_TAG] = bad
    fired, log = node.check()
    assert not fired
    assert node.cached() == good
    assert f"{CRIT}refusing {EXPIRES_TAG}=" in log
    assert "(cached tag)" in log


@pytest.mark.parametrize("relative", ["tomorrow", "next year", "+1 day"])
def test_relative_dates_are_refused_and_the_guard_still_fires(node: Node, imds: Imds, relative: str) -> None:
    """GNU date accepts these, and they move forward on every check: never a deadline."""
    imds.tags[EXPIRES_TAG] = relative
    (node.state / "fallback").write_text(at(-0.01) + "\n")  # launch + ttl has passed
    fired, log = node.check()
    assert fired
    assert f"{CRIT}refusing {EXPIRES_TAG}={relative!r}" in log
    assert node.cached() is None


def test_removing_the_tag_does_not_disarm_a_cached_deadline(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    node.check()
    (node.state / "expires-at").write_text(at(-0.01) + "\n")  # time passes
    del imds.tags[EXPIRES_TAG]
    fired, log = node.check()
    assert fired
    assert "(cached tag) passed" in log


def test_a_clock_set_back_does_not_postpone_the_deadline(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(1)
    assert not node.check()[0]
    # the guard last saw a time 2 h from now (the clock has since been set back 2 h); 60 s of
    # uptime later, the deadline (1 h from the wall clock's now) has passed
    (node.state / "clock").write_text(f"{time.time() + 7200:.0f} {node.uptime_s:.0f} boot-1\n")
    node.uptime_s += 60
    fired, log = node.check()
    assert fired
    assert f"{CRIT}the clock says" in log
    assert "it went back" in log


def test_a_clock_behind_the_launch_time_is_not_trusted(node: Node, imds: Imds) -> None:
    imds.launched = datetime.now(UTC) + timedelta(hours=2)  # EC2 says it launched "later" than now
    imds.tags[EXPIRES_TAG] = at(1)
    fired, log = node.check()
    assert fired
    assert "it went back" in log


def test_no_deadline_at_all_shuts_down(node: Node, imds: Imds) -> None:
    (node.state / "ttl-seconds").unlink()  # the state wiped: no tag, no cache, no fallback
    imds.tags_enabled = False
    fired, log = node.check()
    assert fired
    assert f"{CRIT}no deadline at all" in log


def test_the_user_data_installs_the_units_and_the_ttl() -> None:
    script = user_data_script(28800)
    assert "echo 28800 > /var/lib/flashfleet/ttl-seconds" in script
    assert "systemctl enable --now flashfleet-ttl-guard.timer" in script
    assert (
        "SyslogIdentifier=flashfleet-ttl\nSyslogLevelPrefix=yes\n" in script
    )  # crit lines reach the journal as crit
    assert guard_from_user_data(28800)[0].startswith("#!/usr/bin/python3\n")
    with pytest.raises(ValueError, match="positive"):
        user_data_script(0)
