"""The hand-off: one playbook run from an inventory, for the Pulumi resource, the CLI and the bench.

`validate` (flashfleet.bringup.input_check) refuses a bad inventory, bad role arguments or a
stray secret before any host is touched; each caller validates once (the resource in its check,
the CLI before it asks).
`run_recorded` runs the playbook through `flashfleet.bringup.playbook_run` in this process,
gives the run its own directory, prints progress per host and phase and draws the timeline;
`run_in_child` does the same in a fresh interpreter (the Pulumi provider's way, below).
`teardown` is the one teardown of `flashfleet down` and of the resource's delete.

Run directory: `<runs root>/<stack>/<UTC time>-<playbook>/` with `inventory.json` (the inventory
run against; it never holds secrets), `run.json` (playbook, project, options), `events.jsonl`,
`progress.log`, `summary.txt` and `timeline.png`.

Why a child: the provider serves gRPC from worker threads; ansible-runner starts ansible-playbook
with a pty fork, and a fork of that threaded process crashed the child now and then (SIGSEGV
before exec, seen as rc None). `subprocess` starts a clean interpreter with vfork+exec instead
(`python -m flashfleet.bringup.handoff`). The token and the serving API key travel in the child's
environment only (FLASHFLEET_HF_TOKEN, FLASHFLEET_API_KEY): never on its command line or stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.input_check import validate
from flashfleet.bringup.playbook_run import RunResult, TaskFailure, private_dir, private_open, run_playbook
from flashfleet.bringup.progress import PhaseProgress
from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.bringup.run_dirs import default_runs_root
from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV
from flashfleet.bringup.timeline import write_timeline
from flashfleet.stack.stack_names import stack_name_problem


def new_run_dir(runs_root: Path, stack: str, playbook: str) -> Path:
    # the name is a folder here: `../x` would be made (and chmodded) outside the runs folder
    if problem := stack_name_problem(stack):
        raise BringupInputError(f"{problem} [rule: stack-name]")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = runs_root / stack / f"{stamp}-{Path(playbook).stem}"
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            private_dir(path.parent)
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run directory under {base.parent}")


def stack_of(inventory: Mapping[str, Any]) -> str:
    hosts: Mapping[str, Any] = (inventory.get("all") or {}).get("hosts") or {}
    first: Mapping[str, Any] = next(iter(hosts.values()), {})
    return str(first.get("flashfleet_stack") or "unknown")


def run_recorded(
    playbook: str,
    inventory: Mapping[str, Any],
    *,
    project: Project = DEFAULT_PROJECT,
    runs_root: Path | None = None,
    extravars: Mapping[str, Any] | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
    stack: str | None = None,
    check: bool = False,
    limit: str | None = None,
    tags: str | None = None,
    emit: Callable[[str], None] | None = None,
    checked: bool = True,
    timeout_s: int | None = None,
    reconverge: bool = False,
) -> RunResult:
    """Validates (unless `checked` is False: the caller did), then runs `playbook` of `project`
    and waits.

    `hf_token` (or, when None, the caller's own FLASHFLEET_HF_TOKEN) reaches the roles only
    through the ansible-playbook process environment; no file of the run directory holds it.
    So does `api_key` (FLASHFLEET_API_KEY), the serving API key.
    """
    extravars = dict(extravars or {})
    if checked:
        validate(project, playbook, inventory, extravars, stack=stack, hf_token=hf_token, api_key=api_key)
    run_dir = new_run_dir(runs_root or default_runs_root(), stack or stack_of(inventory), playbook)
    with private_open(run_dir / "inventory.json") as out:
        out.write(json.dumps(inventory, indent=2, default=str) + "\n")
    record = {
        "playbook": playbook,
        "project": str(project.root),
        "check": check,
        "limit": limit,
        "tags": tags,
    }
    with private_open(run_dir / "run.json") as out:
        out.write(json.dumps(record, indent=2) + "\n")
    with private_open(run_dir / "progress.log") as log:
        progress = PhaseProgress(emit, log)
        result = run_playbook(
            playbook,
            inventory,
            run_dir=run_dir,
            extravars=extravars,
            hf_token=hf_token,
            api_key=api_key,
            check=check,
            limit=limit,
            tags=tags,
            on_event=progress,
            project_root=project.root,
            timeout_s=timeout_s,
            reconverge=reconverge,
        )
        progress.finish()
        try:
            private_open(result.events_log.with_name("timeline.png")).close()  # 0600 before it fills
            write_timeline(result.events_log)
        except Exception as err:  # a missing chart must never fail a bring-up
            progress.line(f"timeline not drawn: {err}")
    return result


def run_in_child(
    playbook: str,
    inventory: Mapping[str, Any],
    *,
    project: Project,
    runs_root: Path,
    extravars: Mapping[str, Any] | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
    stack: str | None = None,
    checked: bool = True,
    timeout_s: int | None = None,
) -> RunResult:
    """`run_recorded` in a fresh interpreter; its progress goes to this process's stderr."""
    request = {
        "playbook": playbook,
        "inventory": dict(inventory),
        "project": str(project.root),
        "runs_root": str(runs_root),
        "extravars": dict(extravars or {}),
        "stack": stack,
        "checked": checked,
        "timeout_s": timeout_s,
    }
    env = dict(os.environ)
    if hf_token is not None:
        env[TOKEN_ENV] = hf_token
    if api_key is not None:
        env[API_KEY_ENV] = api_key
    done = subprocess.run(
        [sys.executable, "-m", "flashfleet.bringup.handoff"],
        input=json.dumps(request),
        stdout=subprocess.PIPE,  # the result; progress goes to the inherited stderr
        text=True,
        env=env,
        check=False,
    )
    try:
        reply = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"the playbook runner exited {done.returncode} without a result") from None
    if "error" in reply:
        kind = BringupInputError if reply["error"]["type"] == "BringupInputError" else RuntimeError
        raise kind(reply["error"]["message"])
    return RunResult(
        reply["status"],
        reply["rc"],
        reply["stats"],
        Path(reply["run_dir"]),
        [TaskFailure(**f) for f in reply["failures"]],
        reply.get("unreachable", []),
    )


def _child_main() -> int:
    """The child of `run_in_child`: one request on stdin, one result (or error) on stdout."""
    request = json.load(sys.stdin)
    try:
        result = run_recorded(
            request["playbook"],
            request["inventory"],
            project=Project(Path(request["project"])),
            runs_root=Path(request["runs_root"]),
            extravars=request["extravars"],
            hf_token=os.environ.get(TOKEN_ENV),
            api_key=os.environ.get(API_KEY_ENV),
            stack=request.get("stack"),
            emit=_stderr,
            checked=request["checked"],
            timeout_s=request.get("timeout_s"),
        )
    except Exception as err:
        json.dump({"error": {"type": type(err).__name__, "message": str(err)}}, sys.stdout)
        return 1
    json.dump(
        {
            "status": result.status,
            "rc": result.rc,
            "stats": result.stats,
            "run_dir": str(result.run_dir),
            "failures": [vars(f) for f in result.failures],
            "unreachable": result.unreachable,
        },
        sys.stdout,
    )
    return 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def unreachable_hosts(result: RunResult) -> list[str]:
    """Hosts no connection reached: `dark` in the stats, or (with `ignore_unreachable`, which
    files them under `ignored`) an unreachable event."""
    dark = {h for h, n in result.stats.get("dark", {}).items() if n}
    return sorted(dark | set(result.unreachable))


# Longest a teardown may take before the destroy gives up on it and names the hosts.
TEARDOWN_TIMEOUT_S = 1200


def teardown_verdict(result: RunResult, hosts: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(unreachable hosts, reachable hosts the teardown did not finish on).

    A reachable host either ends with no secret and no server, or is named here. A run stopped
    by its timeout names every host of `hosts` that answered; a run that failed with no host to
    blame (a parse error, a signal) names `the controller`.
    """
    dark = unreachable_hosts(result)
    failed = {f.host for f in result.failures if f.host not in dark and f.host != "-"}
    if result.status == "timeout":
        failed |= {h for h in hosts if h not in dark}
    on_controller = any(f.host == "-" for f in result.failures)  # parse error, timeout, signal
    # ansible-playbook exits non-zero for unreachable hosts alone: that is the warning case.
    if not failed and (on_controller or (not result.ok and not dark)):
        failed = {"the controller"}
    return dark, sorted(failed)


class TeardownError(RuntimeError):
    """A reachable host the teardown did not finish on, or a teardown that cannot run (one line)."""


def teardown(
    inventory: Mapping[str, Any],
    *,
    project: Project = DEFAULT_PROJECT,
    playbook: str = "teardown.yml",
    runs_root: Path | None = None,
    stack: str | None = None,
    extravars: Mapping[str, Any] | None = None,
    emit: Callable[[str], None] | None = _stderr,
    checked: bool = True,
    in_child: bool = False,
) -> RunResult:
    """teardown.yml on the inventory's hosts: the one teardown of `flashfleet down` and of the
    resource's delete (`in_child`, as every provider run). Unreachable hosts are reported, not
    failed; a reachable host the teardown did not finish on raises TeardownError (its secrets or
    services may remain). `checked` False: the caller validated the inventory (or, for a delete,
    it was validated when deployed; the roles may have moved on since)."""
    if not checked:
        try:
            project.playbook(playbook)
        except FileNotFoundError as err:
            # Never a silent skip: the hosts would keep their secrets and servers.
            raise TeardownError(f"teardown cannot run: {err}") from None
    options: dict[str, Any] = {
        "project": project,
        "extravars": dict(extravars or {}),
        "stack": stack,
        "checked": checked,
        "timeout_s": TEARDOWN_TIMEOUT_S,
    }
    if in_child:
        result = run_in_child(playbook, inventory, runs_root=runs_root or default_runs_root(), **options)
    else:
        result = run_recorded(playbook, inventory, runs_root=runs_root, emit=emit, **options)
    dark, failed = teardown_verdict(result, (inventory.get("all") or {}).get("hosts") or {})
    if dark and emit is not None:
        emit(f"warning: teardown: unreachable, left as they are: {', '.join(dark)} ({result.run_dir})")
    if failed:
        raise TeardownError(
            f"teardown did not finish on {', '.join(failed)}; their secrets or servers may remain "
            f"(see {result.run_dir})"
        )
    return result


if __name__ == "__main__":
    sys.exit(_child_main())
