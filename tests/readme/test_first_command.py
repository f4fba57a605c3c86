"""The README's first command, on the machine's own Python, as a new user runs it.

Debian 12's /usr/bin/python3 is "externally managed" (PEP 668): `pip install` into it is refused.
The first set-up command must work there anyway, from a copy of the checkout, with no uv on
PATH, a new home directory, and nothing but the system's own bin folders. It reaches the
package index (the `index` marker: slow tier)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.readme.test_readme_walkthrough import BLOCKS

pytestmark = pytest.mark.index

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _copy_of_checkout(dest: Path) -> Path:
    # what a clone holds: tracked files and untracked ones git does not ignore
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (os.fsdecode(n) for n in listed)):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _stock_env(home: Path) -> dict[str, str]:
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
    # how this machine reaches the package index (certificates, a local wheel folder), and the
    # download cache: where packages come from, not which Python runs
    for key, value in os.environ.items():
        if key.startswith(("PIP_", "SSL_", "REQUESTS_CA", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")):
            env[key] = value
    env["UV_CACHE_DIR"] = os.environ.get("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv"))
    return env


def _first_command() -> str:
    setup = next(b for b in BLOCKS if b.kind == "setup")
    return setup.commands[0].text


def test_the_first_command_works_on_the_externally_managed_system_python(tmp_path: Path) -> None:
    assert SYSTEM_PYTHON.exists(), "this test needs the machine's own /usr/bin/python3"
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    marker = Path(probe.stdout.strip()) / "EXTERNALLY-MANAGED"
    assert marker.exists(), f"{SYSTEM_PYTHON} is not externally managed here: the case is not tested"

    home = tmp_path / "home"
    home.mkdir()
    env = _stock_env(home)
    checkout = _copy_of_checkout(tmp_path / "flashfleet")
    assert shutil.which("uv", path=SYSTEM_PATH) is None, "uv is on the system PATH: not a stock machine"

    # the old first command is refused by the system Python: the case this guards against
    old = subprocess.run(
        ["bash", "-c", "python3 -m pip install uv"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert old.returncode != 0, "pip installed into the system Python: PEP 668 is not in force"

    first = _first_command()
    assert "pip install" not in first, first
    done = subprocess.run(
        ["bash", "-c", first], cwd=checkout, env=env, capture_output=True, text=True, check=False, timeout=900
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "stack gb300-lowlat: GB300 NVL, low latency" in done.stdout, done.stdout[-2000:]
    assert (checkout / ".venv" / "bin" / "flashfleet").exists()
    # nothing went into the system Python
    assert (
        subprocess.run([str(SYSTEM_PYTHON), "-c", "import uv"], check=False, capture_output=True).returncode
        != 0
    )

    # uv came from a venv of the system Python where it can make one, else the standalone installer
    has_venv = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import ensurepip, venv"], check=False, capture_output=True
    )
    uv_python = checkout / ".tools" / "uv" / "bin" / "python"
    uv_binary = uv_python.parent / "uv" if has_venv.returncode == 0 else home / ".local" / "bin" / "uv"
    assert uv_binary.exists(), sorted(p.name for p in checkout.joinpath(".tools").glob("*"))

    # a second run reuses what the first installed (no second venv for uv)
    stamp = uv_python.stat().st_mtime_ns if uv_python.exists() else None
    again = subprocess.run(
        ["bash", "-c", first], cwd=checkout, env=env, capture_output=True, text=True, check=False, timeout=600
    )
    assert again.returncode == 0, again.stderr[-2000:]
    if stamp is not None:
        assert uv_python.stat().st_mtime_ns == stamp
