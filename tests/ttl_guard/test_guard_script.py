"""The TTL guard as the node runs it: the script is cut out of the real user data and run with
python3 against a stand-in IMDS on loopback (IMDSv2: a GET without the session token is refused,
as on EC2; tags can be turned off) and a fake shutdown command that records it ran.

Each case is a way to disarm the guard: missing tag, tags off with nothing cached, IMDS down
on the first check, empty or malformed tag over a good cached deadline, relative dates
(`tomorrow`, `next year`), a clock set back, the state directory removed, a full disk, a
far-future tag, and a bug in the guard itself.
"""

from __future__ import annotations

import os
import shutil
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
from flashfleet.stack.spec import MAX_TTL

from .imds import Imds, serve_imds

# The nodes run Ubuntu's python3 (3.10 on 22.04, 3.12 on 24.04): point this at one to try it.
GUARD_PYTHON = os.environ.get("FLASHFLEET_GUARD_PYTHON", sys.executable)


@pytest.fixture
def imds() -> Iterator[Imds]:
    with serve_imds("127.0.0.1") as state:
        yield state


FAULTS = Path(__file__).with_name("faults.py")
MAX_LIFE_S = int(MAX_TTL.total_seconds())


def guard_from_user_data(ttl_seconds: int, max_life_seconds: int = MAX_LIFE_S) -> tuple[str, str]:
    """(guard script, ttl-seconds value) exactly as the user data writes them on the node."""
    lines = user_data_script(ttl_seconds, max_life_seconds).splitlines()
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

    def check(self, fault: str | None = None, status: int = 0) -> tuple[bool, str]:
        """One timer run, optionally with a fault from faults.py injected: (did it shut down,
        its journal lines); its exit status must be ``status``."""
        (self.root / "uptime").write_text(f"{self.uptime_s:.2f} 10.00\n")
        argv = [sys.executable, str(FAULTS), fault] if fault else [sys.executable]
        argv += [
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
        assert proc.returncode == status, proc.stderr
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
    # nothing listens on port 9; the fallback counts from boot, and the node has just booted
    n = Node(tmp_path, "http://127.0.0.1:9", ttl_seconds=1, uptime_s=0.0)
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


def test_the_user_data_installs_the_units_the_ttl_and_the_cap() -> None:
    script = user_data_script(28800, MAX_LIFE_S)
    assert "echo 28800 > /var/lib/flashfleet/ttl-seconds" in script
    assert f"\nMAX_LIFE_S = {MAX_LIFE_S}\n" in script  # the cap, decided in Python, baked in
    assert "systemctl enable --now flashfleet-ttl-guard.timer" in script
    assert (
        "SyslogIdentifier=flashfleet-ttl\nSyslogLevelPrefix=yes\n" in script
    )  # crit lines reach the journal as crit
    assert guard_from_user_data(28800)[0].startswith("#!/usr/bin/python3\n")
    with pytest.raises(ValueError, match="positive"):
        user_data_script(0, MAX_LIFE_S)
    with pytest.raises(ValueError, match="shorter than its ttl"):
        user_data_script(28800, 3600)


# --- the state directory removed (the guard died on FileNotFoundError and never fired) ---


@pytest.mark.parametrize("fault", [None, "disk-full"], ids=["recreated", "cannot be recreated"])
def test_state_dir_removed_with_a_valid_future_tag_keeps_the_node(
    node: Node, imds: Imds, fault: str | None
) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    shutil.rmtree(node.state)
    fired, log = node.check(fault)
    assert not fired
    assert f"<6>flashfleet-ttl: deadline {imds.tags[EXPIRES_TAG]} (tag):" in log
    if fault is None:
        assert f"{CRIT}the state directory {node.state} was missing: recreated it" in log
        assert node.cached() == imds.tags[EXPIRES_TAG]  # and the cache works again
    else:
        assert f"{CRIT}cannot write {node.state}/expires-at" in log
        assert not node.state.exists()


def test_state_dir_removed_and_no_tag_shuts_down(node: Node, imds: Imds) -> None:
    """As documented: no tag, no cache, no ttl to fall back on: no deadline, so no billing."""
    shutil.rmtree(node.state)
    fired, log = node.check()
    assert fired
    assert f"{CRIT}no {EXPIRES_TAG} tag" in log
    assert f"{CRIT}no deadline at all (state wiped?): shutting down" in log


def test_state_dir_removed_and_the_tag_passed_shuts_down(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(-0.1)
    shutil.rmtree(node.state)
    fired, log = node.check()
    assert fired
    assert f"{CRIT}deadline {imds.tags[EXPIRES_TAG]} (tag) passed: shutting down" in log


# --- a full disk (the guard died on OSError ENOSPC after the deadline) ---


def test_a_full_disk_after_the_deadline_still_shuts_down(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    assert not node.check()[0]  # cached, fallback and clock written while there was room
    imds.tags[EXPIRES_TAG] = at(-0.1)  # moved by a later `up`; the disk has filled since
    before = {p.name: p.read_text() for p in node.state.iterdir()}
    fired, log = node.check("disk-full", status=0)  # 0: the shutdown command accepted it
    assert fired
    assert f"{CRIT}cannot write {node.state}/expires-at ([Errno 28] No space left on device)" in log
    assert f"{CRIT}cannot write {node.state}/clock" in log
    assert f"{CRIT}deadline {imds.tags[EXPIRES_TAG]} (tag) passed: shutting down" in log
    assert {p.name: p.read_text() for p in node.state.iterdir()} == before  # nothing written


def test_a_full_disk_before_the_deadline_keeps_the_node(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    fired, log = node.check("disk-full", status=0)
    assert not fired
    assert f"<6>flashfleet-ttl: deadline {imds.tags[EXPIRES_TAG]} (tag):" in log
    assert node.cached() is None
    assert not (node.state / "fallback").exists()


def test_a_full_disk_from_the_first_boot_with_imds_down_still_fires(tmp_path: Path) -> None:
    """Nothing can be written and no launch time is known: the fallback counts from the boot
    (now - uptime), which stays put from check to check, so it cannot slide forward for ever."""
    n = Node(tmp_path, "http://127.0.0.1:9", ttl_seconds=900, uptime_s=60.0)
    n.boot()
    fired, log = n.check("disk-full")
    assert not fired
    assert f"{CRIT}cannot write {n.state}/fallback" in log
    n.uptime_s = 901.0  # 15 minutes after boot (the timer ran every 5 minutes in between)
    fired, log = n.check("disk-full")
    assert fired
    assert "(fallback fixed at launch) passed: shutting down" in log


@pytest.fixture
def full_state(node: Node) -> Iterator[Path]:
    """The node's state directory on a real tmpfs filled to its last page: the kernel's own
    ENOSPC (it comes at close, not at open). Needs root, as the suite's host tests do: a refused
    mount fails the test rather than skipping what it proves."""
    saved = {p.name: p.read_bytes() for p in node.state.iterdir()}
    mount = ["mount", "-t", "tmpfs", "-o", "size=64k", "flashfleet-ttl-test", str(node.state)]
    mounted = subprocess.run(mount, capture_output=True, text=True, check=False)
    assert mounted.returncode == 0, f"cannot mount a tmpfs for the full-disk case: {mounted.stderr}"
    try:
        for name, data in saved.items():
            (node.state / name).write_bytes(data)
        fd = os.open(node.state / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield node.state
    finally:
        subprocess.run(["umount", str(node.state)], check=False)


def test_a_really_full_disk_after_the_deadline_still_shuts_down(
    node: Node, imds: Imds, full_state: Path
) -> None:
    imds.tags[EXPIRES_TAG] = at(-0.1)
    fired, log = node.check()
    assert fired
    assert f"{CRIT}cannot write {full_state}/expires-at ([Errno 28] No space left on device)" in log
    assert f"{CRIT}deadline {imds.tags[EXPIRES_TAG]} (tag) passed: shutting down" in log
    assert not (full_state / "expires-at.tmp").exists()  # no half-written file left behind


# --- a far-future tag (never fired) ---


@pytest.mark.parametrize(
    "far", ["9999-12-31T23:59:59Z", at(24 * 366)], ids=["year 9999", "a controller clock a year ahead"]
)
def test_a_far_future_tag_is_capped_at_launch_plus_the_longest_ttl(node: Node, imds: Imds, far: str) -> None:
    imds.launched = datetime.now(UTC) - timedelta(days=30)  # ttl 8h, launched a month ago
    imds.tags[EXPIRES_TAG] = far
    fired, log = node.check()
    assert fired
    cap = iso_utc(imds.launched + MAX_TTL)
    assert f"{CRIT}{EXPIRES_TAG} {far} (tag) is past launch + the longest life a node may have" in log
    assert f"using {cap}" in log
    assert f"{CRIT}deadline {cap} (tag, capped at launch + {MAX_LIFE_S} s) passed: shutting down" in log
    assert node.cached() == far  # cached as read: the cap applies on every check, not once


def test_a_tag_within_the_cap_is_honoured(node: Node, imds: Imds) -> None:
    imds.launched = datetime.now(UTC) - timedelta(days=2)
    imds.tags[EXPIRES_TAG] = at(72)  # a later `up` with ttl 3d: launch + 5 d
    fired, log = node.check()
    assert not fired
    assert f"<6>flashfleet-ttl: deadline {imds.tags[EXPIRES_TAG]} (tag):" in log
    assert CRIT not in log


def test_the_cap_counts_from_launch_not_from_the_tag(node: Node, imds: Imds) -> None:
    imds.launched = datetime.now(UTC) - timedelta(days=13)
    imds.tags[EXPIRES_TAG] = at(72)  # 3 days on, but launch + 14 d is 1 day on
    fired, log = node.check()
    assert not fired
    assert f"<6>flashfleet-ttl: deadline {iso_utc(imds.launched + MAX_TTL)} (tag, capped" in log
    imds.launched -= timedelta(days=1, minutes=1)  # (a stand-in for a day passing)
    assert node.check()[0]


# --- a bug in the guard (an unexpected exception must never mean "no shutdown") ---


def test_a_bug_after_the_deadline_still_shuts_down(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    node.check()
    (node.state / "expires-at").write_text(at(-0.01) + "\n")  # time passes
    del imds.tags[EXPIRES_TAG]
    fired, log = node.check("bug", status=0)
    assert fired
    assert f"{CRIT}the check failed (RuntimeError: injected" in log
    assert f"{CRIT}deadline passed or unknown: shutting down" in log


def test_a_bug_before_the_deadline_keeps_the_node_and_fails_the_unit(node: Node, imds: Imds) -> None:
    imds.tags[EXPIRES_TAG] = at(3)
    node.check()
    fired, log = node.check("bug", status=1)  # the unit shows failed; the next check retries
    assert not fired
    assert f"{CRIT}deadline {imds.tags[EXPIRES_TAG]} (state files) not passed: nothing done" in log


def test_a_bug_with_no_deadline_on_disk_shuts_down(node: Node, imds: Imds) -> None:
    shutil.rmtree(node.state)
    fired, log = node.check("bug", status=0)
    assert fired
    assert f"{CRIT}deadline passed or unknown: shutting down" in log
