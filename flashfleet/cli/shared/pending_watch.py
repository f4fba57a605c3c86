"""While `flashfleet up` runs `pulumi up` on a Kubernetes stack: the stack's pods, every few
seconds, until one has been refused by the scheduler for the grace period
(flashfleet.k8s.scheduling). Then the update is cancelled as Ctrl-C would cancel it (SIGINT to
the `pulumi` process the Automation API started: in-flight provider operations are cancelled,
and the state keeps what was created, for `down`), and `up` fails with the pod and the reason
instead of waiting hours for the provider's timeout.

The cluster is read through the same kubeconfig context as the provider (cluster_api).
What it cannot read (no kubeconfig, no API access yet, the namespace not made yet) is retried
until `up` ends; the watch never fails an update by itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

from flashfleet.k8s import names
from flashfleet.k8s.scheduling import Unschedulable, unschedulable

POLL_S = 5.0


def _pulumi_children() -> list[int]:
    """The `pulumi` processes this process started (Linux's /proc, else pgrep)."""
    me = os.getpid()
    proc = Path("/proc")
    if proc.is_dir():
        out = []
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
            if comm == "pulumi" and int(rest[1]) == me:
                out.append(int(entry.name))
        return out
    argv = ["pgrep", "-P", str(me), "-x", "pulumi"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return [int(p) for p in done.stdout.split()]


class PendingWatch:
    def __init__(self, *, context: str | None, namespace: str, stack: str, grace_s: float) -> None:
        self.context, self.namespace, self.stack, self.grace_s = context, namespace, stack, grace_s
        self.found: list[Unschedulable] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pending-watch", daemon=True)

    def __enter__(self) -> PendingWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        from flashfleet.cli.shared.cluster_api import Pods

        api = None
        while not self._stop.wait(POLL_S):
            try:
                api = api or Pods(self.context, self.namespace, f"{names.LABEL_INSTANCE}={self.stack}")
                pods = api.list()
            except Exception:  # unreadable now is retried; the update decides
                continue
            found = unschedulable(pods, datetime.now(UTC), self.grace_s)
            if found:
                self.found = found
                for pid in _pulumi_children():
                    os.kill(pid, signal.SIGINT)
                return
