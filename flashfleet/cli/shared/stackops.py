"""`pulumi up` / `destroy` / outputs of a stack through Pulumi's Automation API.

Only CLI-backed calls: the Automation API's `stack_settings()` ignores `stackConfigDir`
(pulumi/pulumi#10305) and this project keeps its stack files in `stacks/`. Secrets are never
shown: `show_secrets=False` on every operation that prints, and outputs marked secret are
masked by whoever prints them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flashfleet.bringup.project import REPO

if TYPE_CHECKING:
    from pulumi.automation import Stack

# The Pulumi project (Pulumi.yaml, __main__.py, stacks/) `up/down/status` drive: this checkout,
# or a directory of the user's own that holds their stack files beside a copy of those two.
PROJECT_ENV = "FLASHFLEET_PULUMI_PROJECT"

NO_CLI = (
    "the Pulumi CLI is not installed (up/down/status drive it through Pulumi's Automation API); "
    "install it, or work on existing hosts without it: `flashfleet configure|down STACK --inventory FILE`"
)


class PulumiUnavailable(Exception):
    """The Pulumi CLI is missing; the message says what to do instead."""


class PulumiError(Exception):
    """A Pulumi operation on the stack failed (one line)."""


class UnknownStack(PulumiError):
    """No such stack file or Pulumi stack: bad input, not a failure."""


@dataclass(frozen=True)
class StackOutput:
    value: Any
    secret: bool

    def shown(self) -> Any:
        return "[secret]" if self.secret else self.value


def cli_available() -> bool:
    return shutil.which("pulumi") is not None


def project_dir() -> Path:
    return Path(os.environ.get(PROJECT_ENV) or REPO).resolve()


def _last_line(text: str) -> str:
    """The last `error:` line of a failed command's output (the program's own error is in the
    stdout's diagnostics when the engine bails with an empty stderr), else its last line."""
    lines = [
        ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() not in ("stdout:", "stderr:")
    ]
    errors = [ln for ln in lines if "error:" in ln]
    pick = errors or lines
    return pick[-1] if pick else "no message"


def select(stack: str) -> Stack:
    if not cli_available():
        raise PulumiUnavailable(NO_CLI)
    from pulumi import automation as auto

    from flashfleet.stack.files import stack_path

    work_dir = project_dir()
    path = stack_path(stack, work_dir / "stacks")
    if not path.is_file():
        raise UnknownStack(f"stack {stack!r}: no stacks/{path.name} in {work_dir}")
    try:
        return auto.select_stack(stack_name=stack, work_dir=str(work_dir))
    except FileNotFoundError:
        raise PulumiUnavailable(NO_CLI) from None
    except auto.StackNotFoundError:
        raise UnknownStack(f"stack {stack!r}: not initialised (pulumi stack init {stack})") from None
    except auto.CommandError as err:
        raise PulumiError(f"stack {stack!r}: {_last_line(str(err))}") from None


def up(stack: str, on_output: Callable[[str], None]) -> dict[str, StackOutput]:
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        result = st.up(on_output=on_output, show_secrets=False, color="never")
    except auto.CommandError as err:
        raise PulumiError(f"pulumi up {stack}: {_last_line(str(err))}") from None
    return {k: StackOutput(v.value, v.secret) for k, v in result.outputs.items()}


def check_secrets(stack: str) -> None:
    """The stack's own `flashfleet:hfToken` and `flashfleet:apiKey` meet the secret rule
    (BringupInputError, one line) before `up` previews or creates anything: refused here, the
    program's own check would only fail the update. Decrypted in memory, never printed."""
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    from flashfleet.bringup.secret_env import check_secret
    from flashfleet.stack.files import API_KEY_KEY, HF_TOKEN_KEY

    try:
        config = st.get_all_config()
    except auto.CommandError as err:
        raise PulumiError(f"config of {stack}: {_last_line(str(err))}") from None
    for key in (HF_TOKEN_KEY, API_KEY_KEY):
        if key in config:
            check_secret(key, config[key].value)


def preview(stack: str, on_output: Callable[[str], None]) -> None:
    """`pulumi preview`: what `up` would create, change or delete, changing nothing."""
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        st.preview(on_output=on_output, color="never", diff=False)
    except auto.CommandError as err:
        raise PulumiError(f"pulumi preview {stack}: {_last_line(str(err))}") from None


def resources(stack: str) -> list[str]:
    """`TYPE NAME` of each resource the stack's state holds (what `destroy` deletes), without
    the stack itself and its providers."""
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        deployment = st.export_stack().deployment or {}
    except auto.CommandError as err:
        raise PulumiError(f"state of {stack}: {_last_line(str(err))}") from None
    out = []
    for res in deployment.get("resources") or []:
        kind = str(res.get("type", ""))
        if kind == "pulumi:pulumi:Stack" or kind.startswith("pulumi:providers:"):
            continue
        out.append(f"{kind} {str(res.get('urn', '')).rpartition('::')[2]}")
    return out


def destroy(stack: str, on_output: Callable[[str], None]) -> None:
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        st.destroy(on_output=on_output, show_secrets=False, color="never")
    except auto.CommandError as err:
        raise PulumiError(f"pulumi destroy {stack}: {_last_line(str(err))}") from None


def outputs(stack: str) -> dict[str, StackOutput]:
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        return {k: StackOutput(v.value, v.secret) for k, v in st.outputs().items()}
    except auto.CommandError as err:
        raise PulumiError(f"outputs of {stack}: {_last_line(str(err))}") from None


def last_update(stack: str) -> str | None:
    """`<kind> <result> <start time>` of the stack's latest operation, or None."""
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        history = st.history(page_size=1, page=1, show_secrets=False)
    except auto.CommandError as err:
        raise PulumiError(f"history of {stack}: {_last_line(str(err))}") from None
    if not history:
        return None
    h = history[0]
    return f"{h.kind} {h.result} {h.start_time:%Y-%m-%d %H:%M:%S}"


def summaries() -> dict[str, int | None]:
    """Each stack of the project that the backend holds -> its resource count (None: unknown)."""
    if not cli_available():
        raise PulumiUnavailable(NO_CLI)
    from pulumi import automation as auto

    try:
        listed = auto.LocalWorkspace(work_dir=str(project_dir())).list_stacks()
    except auto.CommandError as err:
        raise PulumiError(f"stacks of {project_dir()}: {_last_line(str(err))}") from None
    return {s.name: s.resource_count for s in listed}


def live_state(stack: str) -> tuple[dict[str, StackOutput], datetime | None]:
    """The stack's outputs, and when its resources came to be: the start of the first successful
    update after its last successful destroy (None: no such update on record). One selection."""
    st = select(stack)  # says a missing CLI before the SDK loads
    from pulumi import automation as auto

    try:
        outs = {k: StackOutput(v.value, v.secret) for k, v in st.outputs().items()}
        history = st.history(show_secrets=False)  # newest first
    except auto.CommandError as err:
        raise PulumiError(f"state of {stack}: {_last_line(str(err))}") from None
    since = None
    for h in history:
        if h.kind == "destroy" and h.result == "succeeded":
            break
        if h.kind == "update" and h.result == "succeeded":
            since = h.start_time
    return outs, since
