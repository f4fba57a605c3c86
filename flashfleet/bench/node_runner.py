"""The bench runner seam on a node: each invocation runs bench.yml (`--tags bench`) on the
endpoint's host (node 0, or a cluster router's host of its own).

bench_serving runs inside the serving image with `--network host` and a fresh host directory
mounted at /results; the role fetches the JSONL, the console log and the exit status back into a
scratch directory here, and this turns them into a ``Completed``. The playbook run itself is
recorded like every hand-off (``bench_runs_root``): inventory, events, progress, timeline.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from flashfleet.bench.runner import Completed, Invocation
from flashfleet.bringup.contract import endpoint_host
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.project import DEFAULT_PROJECT, Project

PLAYBOOK = "bench.yml"
BENCH_RUNS = "_bench"  # beside the stacks' run directories, never mistaken for a deployment
RESULTS = "/results"  # where the role mounts the run's host directory in the container
LOG, RESULT = "bench.log", "result.json"  # what roles/bench leaves next to the JSONL


def bench_runs_root(runs_root: Path) -> Path:
    """Where benchmark runs are recorded: apart, so that a stack's latest deployment run is
    never one of them."""
    return runs_root / BENCH_RUNS


def in_container(argv: Sequence[str], output_name: str, node_address: str | None) -> list[str]:
    """The driver's argv as it runs in the container on the endpoint's host.

    The output file goes to the mounted /results. A base URL that names that host's own address
    becomes loopback: from the node itself, its public address goes out and back in through
    the firewall, which admits only the operator's networks.
    """
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--output-file" and out[i + 1] == output_name:
            out[i + 1] = f"{RESULTS}/{output_name}"
        elif word == "--base-url" and node_address:
            parts = urlsplit(out[i + 1])
            if parts.hostname == node_address:
                netloc = "127.0.0.1" + (f":{parts.port}" if parts.port else "")
                out[i + 1] = urlunsplit(parts._replace(netloc=netloc))
    return out


@dataclass(frozen=True)
class NodeRunner:
    """A ``flashfleet.bench.runner.Runner`` that runs on the endpoint host of ``inventory``."""

    stack: str
    inventory: Mapping[str, Any]
    runs_root: Path
    project: Project = DEFAULT_PROJECT
    # The serving API key (None: the caller's FLASHFLEET_API_KEY, if any); only in the
    # ansible-playbook environment, from where the bench role writes a root-only env file.
    api_key: str | None = field(default=None, repr=False)

    def __call__(self, invocation: Invocation) -> Completed:
        node = endpoint_host(dict(self.inventory))
        address = self.inventory["all"]["hosts"][node].get("ansible_host")
        argv = in_container(invocation.argv, invocation.output_name, address)
        with tempfile.TemporaryDirectory(prefix="flashfleet-bench-fetch-") as fetch:
            extravars: dict[str, Any] = {
                "bench_argv": argv,
                "bench_output_name": invocation.output_name,
                "bench_fetch_dir": fetch,
                "bench_env": dict(invocation.env),
            }
            if invocation.timeout_s is not None:
                extravars["bench_timeout_s"] = max(1, math.ceil(invocation.timeout_s))
            from flashfleet.bringup import handoff  # here: a refused bench needs no Ansible

            try:
                result = handoff.run_recorded(
                    PLAYBOOK, self.inventory, project=self.project, runs_root=self.runs_root,
                    extravars=extravars, stack=self.stack, limit=node, tags="bench", api_key=self.api_key,
                )  # fmt: skip
            except BringupInputError as err:
                return Completed(2, "", "", runner_error=f"{PLAYBOOK} refused: {err}")
            return _completed(Path(fetch), invocation.output_name, node, argv, result.summary())


def _completed(fetch: Path, output_name: str, node: str, argv: list[str], summary: str) -> Completed:
    result_file = fetch / RESULT
    if not result_file.is_file():  # the node was not reached, or the role failed before the run
        why = f"{PLAYBOOK} on {node} did not run the benchmark: {summary}"
        return Completed(-1, "", "", runner_error=why)
    outcome = json.loads(result_file.read_text())
    jsonl = fetch / output_name
    log = (fetch / LOG).read_text(errors="replace") if (fetch / LOG).is_file() else ""
    header = f"[flashfleet] on {node}: {' '.join(argv)}\n"
    return Completed(
        int(outcome["rc"]),
        header + log,
        jsonl.read_text(errors="replace") if jsonl.is_file() else "",
        timed_out=bool(outcome["timed_out"]),
    )
