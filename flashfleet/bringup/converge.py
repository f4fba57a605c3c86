"""Converge records: what the controller adds to a node's decision to skip an unchanged role.

A re-run that changes nothing is what users do most, and Ansible's own idempotence still runs
every task. So each bring-up play (one role a play) opens with the `converge` role's check
(roles/converge): on a node, the play ends at once unless what the role is given (every
`<role>_*` variable, as the play gives it) or what it manages (its own `_<role>_watch`) changed
since it last converged there. Ansible decides that, from what the play holds. This module adds
what only the controller knows, as the extra variable `flashfleet_converge`: a full converge
asked for, and per role a salt over the role's files (the converge role's, and those of the
roles it includes, with them),
ansible-core's version and the controller's secrets, as a slow salted hash, so that a rotated
token or API key re-runs what writes it and the record never helps recover it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from flashfleet.bringup.hashes import content_hash
from flashfleet.bringup.playbook_walk import roles_included_by
from flashfleet.bringup.project import files_hash


@dataclass(frozen=True)
class Secrets:
    """The controller's secrets as they enter the salt: never the values themselves."""

    hf_token: str | None = None
    api_key: str | None = None

    def fingerprint(self) -> str:
        # scrypt, not sha256: a weak API key must not be recoverable from a record or an event.
        parts = [s or "" for s in (self.hf_token, self.api_key)]
        if not any(parts):
            return ""
        raw = "\0".join(parts).encode()
        return hashlib.scrypt(raw, salt=b"flashfleet-converge", n=2**14, r=8, p=1, dklen=32).hex()


def carries_records(project_root: Path) -> bool:
    """Whether the project's roles keep converge records (a project of one's own without the
    `converge` role runs every role, as plain Ansible does)."""
    return (project_root / "roles/converge/tasks/check.yml").is_file()


def converge_vars(project_root: Path, *, secrets: Secrets, reconverge: bool = False) -> dict[str, Any]:
    """The `flashfleet_converge` extra variable: `reconverge`, and `salt`: per role, what its
    digest covers beside the `<role>_*` variables and the watch list the role itself reads."""
    roles = project_root / "roles"
    converge = files_hash(roles, roles / "converge")
    run_wide = [metadata.version("ansible-core"), secrets.fingerprint(), converge]
    # a role's files, and those of the roles its tasks include (apt_lock): they act for it
    salt = {
        role.name: content_hash(
            [*run_wide, files_hash(roles, role, *(roles / name for name in sorted(roles_included_by(role))))]
        )
        for role in sorted(roles.iterdir())
        if role.is_dir()
    }
    return {"reconverge": reconverge, "salt": salt}
