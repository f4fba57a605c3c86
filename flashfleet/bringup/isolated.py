"""Run a playbook in a fresh interpreter, for the Pulumi dynamic provider.

The provider serves gRPC from worker threads; ansible-runner starts ansible-playbook with a pty
fork, and a fork of that threaded process crashed the child now and then (SIGSEGV before exec,
seen as rc None). `subprocess` starts a clean interpreter with vfork+exec instead, which runs
`handoff.run_recorded` there. The token travels in the child's environment only: never on its
command line or its stdin; so does the serving API key (FLASHFLEET_API_KEY).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.playbook_run import RunResult, TaskFailure
from flashfleet.bringup.project import Project
from flashfleet.bringup.secret_env import API_KEY_ENV, TOKEN_ENV


def run_isolated(
    playbook: str,
    inventory: dict[str, Any],
    *,
    project: Project,
    runs_root: Path,
    extravars: dict[str, Any] | None = None,
    hf_token: str | None = None,
    api_key: str | None = None,
    checked: bool = True,
    timeout_s: int | None = None,
) -> RunResult:
    request = {
        "playbook": playbook,
        "inventory": inventory,
        "project": str(project.root),
        "runs_root": str(runs_root),
        "extravars": extravars or {},
        "checked": checked,
        "timeout_s": timeout_s,
    }
    env = dict(os.environ)
    if hf_token is not None:
        env[TOKEN_ENV] = hf_token
    if api_key is not None:
        env[API_KEY_ENV] = api_key
    done = subprocess.run(
        [sys.executable, "-m", "flashfleet.bringup.isolated"],
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


def _main() -> int:
    from flashfleet.bringup import handoff

    request = json.load(sys.stdin)
    try:
        result = handoff.run_recorded(
            request["playbook"],
            request["inventory"],
            project=Project(Path(request["project"])),
            runs_root=Path(request["runs_root"]),
            extravars=request["extravars"],
            hf_token=os.environ.get(TOKEN_ENV),
            api_key=os.environ.get(API_KEY_ENV),
            emit=lambda line: print(line, file=sys.stderr, flush=True),
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


if __name__ == "__main__":
    sys.exit(_main())
