"""The one rule for a stack's name, wherever a name enters: a command's argument, a stack file's
name, an inventory's `flashfleet_stack`.

A name becomes a folder (`.runner/<stack>/`, made and chmodded), a file name (its lock), a tag
value and a Kubernetes label: `../../x` would reach a folder outside the runs folder, a template
or a line break would reach a tag or a log. Pulumi's own stack names: letters, digits, `-`, `_`
and `.`, starting with a letter or digit, optionally after an organisation and a project
(`org/project/name`).
"""

from __future__ import annotations

import re

_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

STACK_NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit (as Pulumi names stacks; "
    "org/name and org/project/name too)"
)


def stack_name_problem(name: str) -> str | None:
    """Why `name` cannot be a stack's name, None when it can."""
    parts = name.split("/")
    if len(parts) > 3 or not all(_PART.fullmatch(part) for part in parts):
        return f"{name!r} is not a stack name: {STACK_NAME_RULE}"
    return None
