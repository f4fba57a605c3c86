"""The set-up steps' retry (scripts/lib/retry.sh): a registry download cut short is fetched
again, and a command that keeps failing still fails the set-up."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RETRY = ROOT / "scripts" / "lib" / "retry.sh"


def _retry(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = f"set -euo pipefail; . {RETRY}; retry {command}; echo after"
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "RETRY_PAUSE_S": "0"},
        check=False,
    )


def test_a_command_that_fails_twice_then_succeeds_is_run_three_times(tmp_path: Path) -> None:
    flaky = "bash -c 'echo x >> runs; [ $(wc -l < runs) -ge 3 ]'"
    done = _retry(flaky, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "after\n"
    assert (tmp_path / "runs").read_text().count("x") == 3
    assert len(re.findall(r"attempt [12] of 3 failed", done.stderr)) == 2


def test_a_command_that_always_fails_stops_the_step_after_three_attempts(tmp_path: Path) -> None:
    done = _retry("bash -c 'echo x >> runs; exit 7'", tmp_path)
    assert done.returncode == 1
    assert "after" not in done.stdout
    assert (tmp_path / "runs").read_text().count("x") == 3
    assert "attempt 3 of 3 failed" in done.stderr


def test_every_registry_fetch_in_the_set_up_steps_goes_through_retry() -> None:
    # A fetch in command position: at the start of a line or after &&, ||, ; or {.
    fetch = re.compile(
        r"(^|&&|\|\||;|\{)\s*(\"\$\{pip\[@\]\}\"|python3 -m pip download|"
        r"apt-get (update|install|download)|go get)"
    )
    bare = []
    for step in sorted((ROOT / "scripts" / "setup.d").glob("*.sh")):
        for number, line in enumerate(step.read_text().splitlines(), 1):
            if fetch.search(line.split("#", 1)[0]):
                bare.append(f"{step.name}:{number}: {line.strip()}")
    assert not bare, "\n".join(bare)
    # debootstrap fetches a whole Debian: its wrapper starts from an empty tree on each attempt.
    hosts = (ROOT / "scripts" / "setup.d" / "20-test-hosts.sh").read_text()
    assert "retry bootstrap" in hosts
    assert 'rm -rf "$base.tmp"\n    debootstrap' in hosts
