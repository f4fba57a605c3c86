"""The real SGLang router (`sglang-router` 0.3.2, its Rust router) on loopback, for tests: started
from the oracle venv's Python (scripts/setup.d/10-sglang-oracle.sh installs it) in front of the
stand-in workers (tests/serve/standin_sglang.py), and waited for until `GET /workers` lists every
worker healthy. A test that uses it carries the `oracle` marker (tests/conftest.py).

    with real_router(["--worker-urls", a.url, b.url, "--policy", "round_robin"],
                     expect=[a.url, b.url], log=tmp_path / "router.log") as router:
        chat(router.url, "hello")
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
ORACLE_PYTHON = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
LAUNCH = ("-m", "sglang_router.launch_router")
# SMG 1.13.0 (PyPI `smg`, installed beside it by the same script): `smg launch`, the same worker
# API (`GET/POST /workers`, `DELETE /workers/ID`) and flag names for what flashfleet renders
SMG_LAUNCH = ("-m", "smg", "launch")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)


@dataclass
class RealRouter:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def workers(self) -> list[dict[str, Any]]:
        """`GET /workers`: one entry per registered worker (url, worker_type, is_healthy, load...)."""
        return list(get_json(f"{self.url}/workers")["workers"])

    def healthy(self) -> set[str]:
        return {w["url"] for w in self.workers() if w["is_healthy"]}

    def wait_for(self, want: set[str], timeout: float = 60) -> list[dict[str, Any]]:
        """Waits until the healthy workers are exactly `want`; returns `/workers`'s list."""
        deadline, seen = time.monotonic() + timeout, "nothing"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the router exited {self.proc.returncode}:\n{self.tail()}")
            try:
                workers = self.workers()
                seen = json.dumps(workers)
                if {w["url"] for w in workers if w["is_healthy"]} == want:
                    return workers
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise AssertionError(
            f"the router never listed {sorted(want)} healthy; /workers said {seen}\n{self.tail()}"
        )

    def log_text(self) -> str:
        """What the router wrote, without its terminal colours."""
        return re.sub(r"\x1b\[[0-9;]*m", "", self.log.read_text(errors="replace"))

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def real_router(
    args: Sequence[str],
    *,
    expect: Sequence[str],
    log: Path,
    python: Path = ORACLE_PYTHON,
    timeout: float = 60,
    launch: Sequence[str] = LAUNCH,
) -> Iterator[RealRouter]:
    """`python -m sglang_router.launch_router ARGS --host 127.0.0.1 --port FREE` (or `launch`:
    SMG_LAUNCH), its output in `log`; yields once every URL in `expect` is listed healthy; stops
    it on exit."""
    if not python.exists():
        raise RuntimeError(f"{python} missing: run scripts/setup.d/10-sglang-oracle.sh")
    port = free_port()
    # its Prometheus exporter takes a port of its own (29000 unless told): two routers, or any
    # other process on it, and the router panics at start
    argv = [str(python), *launch, *args, "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    router = RealRouter(f"http://127.0.0.1:{port}", proc, log)
    try:
        router.wait_for(set(expect), timeout)
        yield router
    finally:
        router.stop()


def chat(
    url: str, content: str, *, max_tokens: int = 4, stream: bool = False, timeout: float = 30
) -> tuple[int, str]:
    """One chat request: (HTTP status, body text)."""
    body = {"model": "any", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "stream": stream}  # fmt: skip
    req = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()
