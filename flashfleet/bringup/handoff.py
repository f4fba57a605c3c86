"""The ansible-runner hand-off shared by the Pulumi resource, the CLI and the bench teardown.

On top of `flashfleet.bringup.playbook_run`: refuses a bad inventory or bad role arguments before any host
is touched, gives every run its own directory, prints progress per host and phase, and draws
the timeline. Run directory: `<runs root>/<stack>/<UTC time>-<playbook>/` with
`inventory.json` (the inventory run against; it never holds secrets), `run.json` (playbook,
project, options), `events.jsonl`,
`progress.log`, `summary.txt` and `timeline.png`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flashfleet.bringup.arguments import check_role_arguments
from flashfleet.bringup.contract import check_inventory
from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.playbook_run import RunResult, private_dir, private_open, run_playbook
from flashfleet.bringup.progress import PhaseProgress
from flashfleet.bringup.project import DEFAULT_PROJECT, Project
from flashfleet.bringup.redaction import Redactor
from flashfleet.bringup.run_dirs import default_runs_root
from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV, check_env_secrets, check_secret
from flashfleet.bringup.timeline import write_timeline


def new_run_dir(runs_root: Path, stack: str, playbook: str) -> Path:
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


def validate(
    project: Project,
    playbook: str,
    inventory: Mapping[str, Any],
    extravars: Mapping[str, Any],
    *,
    stack: str | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
) -> None:
    """Everything that can be refused before a host is touched; raises BringupInputError."""
    try:
        project.playbook(playbook)
    except FileNotFoundError as err:
        raise BringupInputError(f"playbook: {err}") from None
    check_inventory(inventory, stack)
    for name, what, secret in ((TOKEN_ENV, "HF token", hf_token), (API_KEY_ENV, "API key", api_key)):
        check_secret(name, secret)
        if secret and Redactor.of([secret]).finds([inventory, extravars]):  # in any form
            raise BringupInputError(
                f"inventory/extravars: contain the {what}; it travels only in the environment"
            )
    check_env_secrets()
    check_role_arguments(project, playbook, inventory, extravars)


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
    """Validates (unless `checked` is False), then runs `playbook` of `project` and waits.

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
