"""The PD decode watcher (roles/sglang_serve/files/pd_heal.py) as its unit runs it, against a
prefill whose /health goes away and comes back, with a stand-in `systemctl` on PATH that reports
when each decode unit became active and records what the watcher asks of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

WATCHER = Path(__file__).resolve().parents[2] / "roles/sglang_serve/files/pd_heal.py"

# Answers `show` from units.json (unit -> ActiveEnterTimestampMonotonic in µs; absent: inactive)
# and logs every other call; try-restart makes the unit active from now.
SYSTEMCTL = """#!{python}
import json, sys, time
state = {state!r}
units = json.load(open(state))
if sys.argv[1] == "show":
    unit = sys.argv[-1]
    if unit in units:
        print("ActiveState=active"); print(f"ActiveEnterTimestampMonotonic={{units[unit]}}")
    else:
        print("ActiveState=inactive"); print("ActiveEnterTimestampMonotonic=0")
    sys.exit(0)
with open({log!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1] == "try-restart" and sys.argv[2] in units:
    units[sys.argv[2]] = int(time.monotonic() * 1e6)
    json.dump(units, open(state, "w"))
"""


class Health(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def wait_for(watcher: subprocess.Popen[str], seen: list[str], words: str, timeout: float = 60) -> None:
    """Read the watcher's lines until one holds `words`: the test follows what the watcher saw,
    not the clock, so a loaded machine that starts or polls late changes nothing."""
    assert watcher.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = watcher.stdout.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            return
    raise AssertionError(f"the watcher never said {words!r}: {''.join(seen)}")


def serve(port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Health)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def stand_in_systemctl(tmp_path: Path) -> tuple[Path, Path]:
    """SYSTEMCTL in tmp_path/bin (start_watcher puts it first on PATH): its call log and the
    units' state file it reads."""
    bin_dir, log, state = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "units.json"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        SYSTEMCTL.format(python=sys.executable, state=str(state), log=str(log))
    )
    (bin_dir / "systemctl").chmod(0o755)
    log.write_text("")
    return log, state


def start_watcher(
    tmp_path: Path, port: int, units: list[str], *, poll_s: float, down_polls: int
) -> subprocess.Popen[str]:
    """The watcher as its unit runs it, on one prefill at 127.0.0.1:port, with the stand-in
    systemctl on PATH."""
    config = tmp_path / "pd-heal.json"
    config.write_text(json.dumps({"prefills": [f"http://127.0.0.1:{port}/health"], "units": units,
                                  "poll_s": poll_s, "down_polls": down_polls, "probe_timeout_s": 1}))  # fmt: skip
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    return subprocess.Popen(
        [sys.executable, str(WATCHER), str(config)], env=env, stdout=subprocess.PIPE, text=True
    )


def test_a_decode_up_since_before_its_prefills_outage_is_restarted_once_and_only_it(tmp_path: Path) -> None:
    log, state = stand_in_systemctl(tmp_path)
    prefill = serve()
    port = prefill.server_address[1]
    # old: up long before; fresh: starts during the outage (as an update's cut starts it)
    state.write_text(json.dumps({"old.service": 1, "fresh.service": 1}))
    units = ["old.service", "fresh.service", "stopped.service"]
    watcher = start_watcher(tmp_path, port, units, poll_s=0.05, down_polls=3)
    seen: list[str] = []
    try:
        wait_for(watcher, seen, "watching")
        prefill.shutdown()
        prefill.server_close()  # the prefill dies: connections refused
        wait_for(watcher, seen, "is down")
        state.write_text(json.dumps({"old.service": 1, "fresh.service": int(time.monotonic() * 1e6)}))
        serve(port)  # its successor, behind the same address
        wait_for(watcher, seen, "fresh.service")  # it judged both units (old is judged first)
        time.sleep(1.5)  # many polls more: a loop would show
    finally:
        watcher.terminate()
        rest, _ = watcher.communicate(timeout=10)
        out = "".join(seen) + rest
    assert log.read_text().splitlines() == ["try-restart old.service"], out
    assert "is down" in out
    assert "fresh.service started after its outage began (or is stopped): left as it is" in out


def test_a_prefill_that_misses_fewer_polls_than_an_outage_restarts_nothing(tmp_path: Path) -> None:
    log, state = stand_in_systemctl(tmp_path)
    state.write_text(json.dumps({"old.service": 1}))
    prefill = serve()
    port = prefill.server_address[1]
    watcher = start_watcher(tmp_path, port, ["old.service"], poll_s=0.2, down_polls=5)
    seen: list[str] = []
    try:
        wait_for(watcher, seen, "watching")
        prefill.shutdown()
        prefill.server_close()
        time.sleep(0.3)  # one or two failed polls: no outage
        serve(port)
        time.sleep(1)
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
    assert log.read_text() == "", out
