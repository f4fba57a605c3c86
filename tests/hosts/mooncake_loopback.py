"""A real Mooncake master and store client on this machine's loopback, for tests whose in-process
stand-in server reads and writes HiCache's L3 tier: the same non-CUDA wheel and Debian libraries
scripts/setup.d/30-mooncake.sh caches for the test hosts, unpacked once into a venv beside them
(`dpkg-deb -x`: nothing is installed on this machine).

The wheel imports only in that venv, so the store client runs there as a child process and the
server talks to it over a pipe, one JSON line a call: put, get and is_exist reach the real master
and the real segment (protocol tcp) with the bytes intact."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from hosts.harness import CACHE

MOONCAKE_CACHE = CACHE / "mooncake"
RUNNER = MOONCAKE_CACHE / "runner"  # the venv and the unpacked libraries, keyed by the cache's stamp
# what the master and store.so load even over TCP (ldd), from the cached Debian packages
LIBRARY_PACKAGES = ("libibverbs1", "ibverbs-providers", "librdmacm1", "libnuma1", "libnl-3-200",
                    "libnl-route-3-200")  # fmt: skip
SEGMENT = 64 << 20  # what the stand-in images mount (tests/serve/standin_sglang.py join_mooncake)
BUFFER = 16 << 20

# The client end: the store's three calls, one JSON request and one JSON answer a line.
CLIENT = r"""
import base64, json, sys
from mooncake.store import MooncakeDistributedStore
store = MooncakeDistributedStore()
rc = store.setup(*json.loads(sys.argv[1]))
print(json.dumps({"setup": rc}), flush=True)
for line in sys.stdin:
    call = json.loads(line)
    if call["op"] == "put":
        out = store.put(call["key"], base64.b64decode(call["value"]))
    elif call["op"] == "get":
        out = base64.b64encode(store.get(call["key"])).decode()
    else:
        out = store.is_exist(call["key"])
    print(json.dumps({"out": out}), flush=True)
"""


def _libraries() -> str:
    return f"{RUNNER}/libs/usr/lib/x86_64-linux-gnu:{RUNNER}/libs/lib/x86_64-linux-gnu"


def runner() -> Path:
    """The venv with the cached wheel and the unpacked libraries; built once per stamp (a lock
    keeps two pytest workers from building it at once)."""
    stamp = (MOONCAKE_CACHE / ".ok").read_text() if (MOONCAKE_CACHE / ".ok").exists() else None
    if stamp is None:
        raise RuntimeError(f"{MOONCAKE_CACHE} missing: run scripts/setup.d/30-mooncake.sh")
    MOONCAKE_CACHE.mkdir(parents=True, exist_ok=True)
    with open(MOONCAKE_CACHE / ".runner.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (RUNNER / ".ok").exists() and (RUNNER / ".ok").read_text() == stamp:
            return RUNNER
        shutil.rmtree(RUNNER, ignore_errors=True)
        building = Path(tempfile.mkdtemp(prefix="runner.", dir=MOONCAKE_CACHE))
        try:
            for package in LIBRARY_PACKAGES:
                (deb,) = (MOONCAKE_CACHE / "debs").glob(f"{package}_*.deb")
                subprocess.run(["dpkg-deb", "-x", str(deb), str(building / "libs")], check=True)
            # the wheel is built for the hosts' Python 3.11, which this machine's python3 is too
            subprocess.run(["python3", "-m", "venv", str(building / "venv")], check=True)
            wheel = stamp.split()[0]  # mooncake-transfer-engine-non-cuda==VERSION
            subprocess.run([str(building / "venv/bin/pip"), "install", "--quiet", "--no-index",
                            "--find-links", str(MOONCAKE_CACHE / "wheels"), wheel], check=True)  # fmt: skip
            building.rename(RUNNER)  # the venv's scripts name their folder: run them by python -m
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        (RUNNER / ".ok").write_text(stamp)
        return RUNNER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StoreClient:
    """The Store the stand-in server takes (is_exist, get, put), answered by the real client."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lock = threading.Lock()  # the stand-in serves requests on several threads

    def _call(self, **call: Any) -> Any:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None
        assert stdout is not None
        with self.lock:
            stdin.write(json.dumps(call) + "\n")
            stdin.flush()
            line = stdout.readline()
        if not line:
            raise RuntimeError(f"the Mooncake store client exited ({self.proc.poll()})")
        return json.loads(line)["out"]

    def is_exist(self, key: str) -> int:
        return int(self._call(op="is_exist", key=key))

    def get(self, key: str) -> bytes:
        return base64.b64decode(self._call(op="get", key=key))

    def put(self, key: str, value: bytes) -> int:
        return int(self._call(op="put", key=key, value=base64.b64encode(value).decode()))


class Loopback:
    def __init__(self, venv: Path, master: str, metadata: str, log: IO[str]) -> None:
        self.venv, self.master, self.metadata, self.log = venv, master, metadata, log
        self.clients: list[subprocess.Popen[str]] = []

    def client(self) -> StoreClient:
        """A store client that mounts a segment of its own in the master's pool."""
        setup = [f"127.0.0.1:{_free_port()}", self.metadata, SEGMENT, BUFFER, "tcp", "", self.master]
        proc = subprocess.Popen(
            [str(self.venv / "bin/python"), "-c", CLIENT, json.dumps(setup)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "LD_LIBRARY_PATH": _libraries()},
        )  # fmt: skip
        self.clients.append(proc)
        assert proc.stdout is not None
        answer = proc.stdout.readline()
        if not answer or json.loads(answer)["setup"] != 0:
            raise RuntimeError(f"Mooncake store setup failed: {answer.strip() or proc.wait()}")
        return StoreClient(proc)


@contextmanager
def mooncake_loopback(log_dir: Path) -> Iterator[Loopback]:
    """A real mooncake_master with its HTTP metadata server on free loopback ports."""
    venv = runner() / "venv"
    rpc, http, metrics = _free_port(), _free_port(), _free_port()
    log = (log_dir / "mooncake.log").open("w")
    master = subprocess.Popen(
        [str(venv / "bin/python"), "-c", "import mooncake, os, sys; "
         "os.execv(os.path.join(os.path.dirname(mooncake.__file__), 'mooncake_master'), sys.argv[1:])",
         "mooncake_master", f"--rpc_port={rpc}", "--enable_http_metadata_server=true",
         f"--http_metadata_server_port={http}", f"--metrics_port={metrics}"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "LD_LIBRARY_PATH": _libraries()},
    )  # fmt: skip
    loopback = Loopback(venv, f"127.0.0.1:{rpc}", f"http://127.0.0.1:{http}/metadata", log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/metadata?key=probe", timeout=1)
            except urllib.error.HTTPError:
                break  # the metadata server answers (404 for an unknown key): the master is up
            except OSError as err:
                if master.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mooncake_master did not start: {(log_dir / 'mooncake.log').read_text()}"
                    ) from err
                time.sleep(0.1)
        yield loopback
    finally:
        for proc in [*loopback.clients, master]:
            proc.kill()
            proc.wait()
        log.close()


if __name__ == "__main__":  # a quick look: python tests/hosts/mooncake_loopback.py
    with tempfile.TemporaryDirectory() as tmp, mooncake_loopback(Path(tmp)) as lo:
        a, b = lo.client(), lo.client()
        print(a.put("k", b"bytes"), b.is_exist("k"), b.get("k"), file=sys.stdout)
