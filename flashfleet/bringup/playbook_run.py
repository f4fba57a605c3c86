"""Runs a playbook of this repository through ansible-runner: the layer under the hand-off
(`handoff.run_recorded`, which the Pulumi provider and the CLI call).

Playbooks come from `playbooks/` and roles from `roles/` at the repository root; the inventory
is a dict (what `flashfleet.inventory` builds), handed to Ansible with every string marked
unsafe (`bringup.inert_vars`), so no value is ever templated. The Hugging Face token travels only in the
environment of the ansible-playbook process (`FLASHFLEET_HF_TOKEN`): ansible-runner records its
whole environment in `artifacts/<ident>/command`, so its artifacts live in a private temporary
directory that is deleted after the run, and the run directory keeps only what this module
writes there: `events.jsonl` (every event, as Ansible censored it) and `summary.txt`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flashfleet.bringup.converge import Secrets, carries_records, converge_vars
from flashfleet.bringup.inert_vars import inert_yaml
from flashfleet.bringup.project import REPO
from flashfleet.bringup.redaction import Redactor
from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV, check_secret
from flashfleet.stack.safe_values import host_key

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# ansible-runner event -> the status a progress line shows
_STATUS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
    "runner_item_on_failed": "failed",
}


@dataclass(frozen=True)
class Progress:
    """One task result on one host, for a progress display."""

    host: str
    role: str
    phase: str
    task: str
    status: str  # ok, changed, failed, skipped, unreachable

    def __str__(self) -> str:
        where = "/".join(p for p in (self.role, self.phase) if p)
        return f"[{self.host}] {where}: {self.task} ... {self.status}"


@dataclass(frozen=True)
class TaskFailure:
    host: str
    role: str
    task: str
    message: str

    def __str__(self) -> str:
        role = f"{self.role}: " if self.role else ""
        return f"{self.host}: {role}{self.task}\n    {self.message}"


@dataclass
class RunResult:
    status: str  # successful, failed, timeout, canceled
    rc: int
    stats: dict[str, dict[str, int]]
    run_dir: Path
    failures: list[TaskFailure] = field(default_factory=list)
    # Hosts that answered no connection. With `ignore_unreachable` Ansible counts them under
    # `ignored`, not `dark`: the events are the only place that says so either way.
    unreachable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0

    @property
    def events_log(self) -> Path:
        return self.run_dir / "events.jsonl"

    def count(self, key: str, host: str | None = None) -> int:
        """Sum of one stats column (`changed`, `failures`, `ok`, ...), for one host or all."""
        per_host = self.stats.get(key, {})
        return per_host.get(host, 0) if host else sum(per_host.values())

    def summary(self) -> str:
        head = f"playbook {self.status} (rc {self.rc}); events: {self.events_log}"
        if not self.failures:
            return head
        return "\n".join([head, "failed:", *(f"  {f}" for f in self.failures)])


def split_task_name(name: str) -> tuple[str, str]:
    """`"Install | add the CUDA repository"` -> (`"install"`, `"add the CUDA repository"`)."""
    phase, sep, task = name.partition(" | ")
    return (phase.strip().lower(), task.strip()) if sep else ("", name.strip())


# how the project's own checks (run on the node, or inside a build) name each problem
_FAIL = "FAIL: "


def failure_message(res: Mapping[str, Any]) -> str:
    """The most useful line(s) of a failed task result: the message, each problem the project's
    own checks named (their `FAIL:` lines, which a long build log would bury), and each stream's
    last line."""
    if res.get("censored"):
        return str(res["censored"])
    parts = [str(res.get("msg", "")).strip()]
    for stream in ("stderr", "stdout"):
        text = str(res.get(stream, "") or "").strip()
        if text and text not in parts[0]:
            if len(text) <= 400:
                parts.append(text)
                continue
            lines = text.splitlines()
            parts += [line.strip() for line in lines[:-1] if line.strip().startswith(_FAIL)]
            parts.append(lines[-1])
    return " | ".join(p for p in parts if p) or "task failed (no message)"


def private_open(path: Path) -> Any:
    """A new file only its owner can read (0600), whatever the umask: run directories hold
    inventories and events."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8")


def private_dir(path: Path) -> Path:
    """`path` and every directory created for it, owner-only (0700)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        p.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)
    return path


_PINNING_OPTIONS = re.compile(r"-o\s*(StrictHostKeyChecking|UserKnownHostsFile)=\S+\s*", re.IGNORECASE)


def pin_host_keys(inventory: Mapping[str, Any], known_hosts: Path) -> dict[str, Any]:
    """The inventory with every host that lists `flashfleet_host_keys` pinned to them: a
    known_hosts file of this run and StrictHostKeyChecking=yes. Existing hosts list the keys of
    their stack's `hostKeys`, AWS nodes those their consoles showed (components.aws_host_keys):
    one path for both. The project's ansible.cfg turns checking off for the hosts that list none:
    existing hosts under `allowUnpinnedHostKeys`, test hosts."""
    root = dict(inventory.get("all") or {})
    hosts = dict(root.get("hosts") or {})
    lines = []
    for name, hvars in hosts.items():
        keys = (hvars or {}).get("flashfleet_host_keys") or []
        if not keys:
            continue
        address, port = str(hvars.get("ansible_host", name)), int(hvars.get("ansible_port", 22))
        where = address if port == 22 else f"[{address}]:{port}"
        lines += [f"{where} {host_key(key)}" for key in keys]
        common = _PINNING_OPTIONS.sub("", str(hvars.get("ansible_ssh_common_args", ""))).strip()
        hosts[name] = {
            **hvars,
            "ansible_host_key_checking": True,
            "ansible_ssh_common_args": f"{common} -o StrictHostKeyChecking=yes "
            f"-o UserKnownHostsFile={known_hosts}".strip(),
        }
    if not lines:
        return dict(inventory)
    with private_open(known_hosts) as out:
        out.write("\n".join(lines) + "\n")
    return {**inventory, "all": {**root, "hosts": hosts}}


class _EventSink:
    """Writes every event to events.jsonl and turns task results into Progress/TaskFailure."""

    def __init__(self, path: Path, on_progress: Callable[[Progress], None] | None) -> None:
        self.file = private_open(path)
        self.on_progress = on_progress
        self.failures: list[TaskFailure] = []
        self.unreachable: set[str] = set()
        # an async task's `changed` arrives with its async event: no_log hides it afterwards
        self.async_changed: dict[tuple[str, str], bool] = {}

    def __call__(self, event: dict[str, Any]) -> bool:
        self.file.write(json.dumps(event, default=str) + "\n")
        self.file.flush()
        if event.get("event") in {"verbose", "error"} and "ERROR!" in event.get("stdout", ""):
            # parse and inventory errors come before any task: keep Ansible's own words
            message = _ANSI.sub("", event["stdout"]).strip()
            self.failures.append(TaskFailure("-", "", "playbook", message))
            return True
        data = event.get("event_data", {})
        res = data.get("res", {}) or {}
        key = (str(data.get("host", "")), str(data.get("task_uuid", "")))
        if event.get("event") in {"runner_on_async_ok", "runner_on_async_failed"}:
            self.async_changed[key] = bool(res.get("changed"))
        status = _STATUS.get(event.get("event", ""))
        if status is None or "host" not in data:
            return True
        if status == "ok" and res.get("changed", self.async_changed.get(key)):
            status = "changed"
        phase, task = split_task_name(str(data.get("task", "")))
        role = str(data.get("role", "") or "")
        host = str(data["host"])
        if status == "unreachable":
            self.unreachable.add(host)
        if status in {"failed", "unreachable"} and not data.get("ignore_errors"):
            self.failures.append(TaskFailure(host, role, task, failure_message(res)))
        if self.on_progress is not None and event["event"].startswith("runner_on_"):
            self.on_progress(Progress(host, role, phase, task, status))
        return True

    def close(self) -> None:
        self.file.close()


def run_playbook(
    playbook: str,
    inventory: Mapping[str, Any],
    *,
    run_dir: Path,
    extravars: Mapping[str, Any] | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
    check: bool = False,
    diff: bool = False,
    limit: str | None = None,
    tags: str | None = None,
    skip_tags: str | None = None,
    forks: int = 16,
    on_progress: Callable[[Progress], None] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    project_root: Path = REPO,
    timeout_s: int | None = None,
    reconverge: bool = False,
    records: bool = True,
) -> RunResult:
    """Runs `<project_root>/playbooks/<playbook>` against `inventory` and waits for it.

    `hf_token` (or, when None, the caller's own `FLASHFLEET_HF_TOKEN`) reaches the roles only
    through the ansible-playbook process environment; no file this writes contains it. So does
    `api_key` (or the caller's `FLASHFLEET_API_KEY`), and no event carries it either.
    `on_event` sees every raw event first (phase starts, for live progress). A project without
    its own ansible.cfg runs with this repository's settings. `timeout_s` stops a run that
    takes longer (status `timeout`): a wedged host cannot hold the caller forever.
    The playbooks get `flashfleet_converge` (flashfleet.bringup.converge): on each node, a
    bring-up role runs only when what it is given or manages changed since it last converged
    there, unless `reconverge` asks for every role; `records=False` keeps no record at all
    (every role runs).
    """
    # Defence in depth: no event reaches a file or a handler with a secret in it, and a secret
    # that cannot be hidden safely stops the run before anything is written or touched.
    secret_sources = ((TOKEN_ENV, hf_token), (TOKEN_ENV, os.environ.get(TOKEN_ENV)),
                      (API_KEY_ENV, api_key), (API_KEY_ENV, os.environ.get(API_KEY_ENV)))  # fmt: skip
    for name, value in secret_sources:
        check_secret(name, value)
    redactor = Redactor.of(value for _, value in secret_sources)
    private_dir(run_dir)
    inventory = pin_host_keys(inventory, run_dir / "known_hosts")
    config = project_root / "ansible.cfg"
    envvars = {
        # the venv that runs us also provides ansible-playbook
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(config if config.is_file() else REPO / "ansible.cfg"),
    }
    if hf_token is not None:
        envvars[TOKEN_ENV] = hf_token
    if api_key is not None:
        envvars[API_KEY_ENV] = api_key
    cmdline = " ".join(
        opt for opt, on in (("--check", check), ("--diff", diff)) if on
    )  # ansible-runner takes extra ansible-playbook options as one string
    sink = _EventSink(run_dir / "events.jsonl", on_progress)

    def handle(event: dict[str, Any]) -> bool:
        event = redactor(event)
        if on_event is not None:
            on_event(event)
        return sink(event)

    extravars = dict(extravars or {})
    if records and carries_records(project_root):
        extravars["flashfleet_converge"] = converge_vars(
            project_root,
            secrets=Secrets(hf_token or os.environ.get(TOKEN_ENV), api_key or os.environ.get(API_KEY_ENV)),
            reconverge=reconverge,
        )
    private = Path(tempfile.mkdtemp(prefix="flashfleet-runner-"))  # holds the env dump; removed
    try:
        # Both as files whose every string is `!unsafe`: Ansible never templates a value that
        # came from a stack, a lock, a registry or the environment (bringup.inert_vars).
        inventory_file, extravars_file = private / "inventory.yml", private / "extravars.yml"
        for path, data in ((inventory_file, inventory), (extravars_file, extravars)):
            with private_open(path) as out:
                out.write(inert_yaml(data))
        import ansible_runner  # here: a refusal, `validate` and `logs -f` never start a run

        runner = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(project_root / "playbooks"),
            roles_path=[str(project_root / "roles")],
            playbook=playbook,
            inventory=str(inventory_file),
            extravars=str(extravars_file),  # read as `-e @FILE`: no value on the command line
            envvars=envvars,
            cmdline=cmdline or None,
            limit=limit,
            tags=tags,
            skip_tags=skip_tags,
            forks=forks,
            event_handler=handle,
            suppress_env_files=True,
            quiet=True,
            timeout=timeout_s,
        )
        stats: dict[str, dict[str, int]] = runner.stats or {}
        if runner.rc is None:  # ansible-playbook died on a signal: pexpect saw no exit status
            sink.failures.append(TaskFailure("-", "", "ansible-playbook", "ended without an exit status"))
        rc = -1 if runner.rc is None else int(runner.rc)
        if runner.status == "timeout":
            sink.failures.append(TaskFailure("-", "", "ansible-playbook", f"stopped after {timeout_s} s"))
        result = RunResult(str(runner.status), rc, stats, run_dir, sink.failures, sorted(sink.unreachable))
    finally:
        sink.close()
        shutil.rmtree(private, ignore_errors=True)
    with private_open(run_dir / "summary.txt") as out:
        out.write(result.summary() + "\n")
    return result
