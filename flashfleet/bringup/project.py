"""Where playbooks and roles come from, and the content hash that tells when they changed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Never part of what a run does: caches and editor/ansible leftovers.
_IGNORED_PARTS = {"__pycache__", ".git", ".pytest_cache"}
_IGNORED_SUFFIXES = {".pyc", ".retry", ".swp"}


@dataclass(frozen=True)
class Project:
    """A directory with `playbooks/` and `roles/` (this repository, or a test project)."""

    root: Path

    @property
    def playbooks(self) -> Path:
        return self.root / "playbooks"

    @property
    def roles(self) -> Path:
        return self.root / "roles"

    @property
    def config(self) -> Path:
        # A project without its own ansible.cfg runs with this repository's settings.
        own = self.root / "ansible.cfg"
        return own if own.is_file() else REPO / "ansible.cfg"

    def playbook(self, name: str) -> Path:
        path = self.playbooks / name
        if Path(name).name != name or not path.is_file():
            raise FileNotFoundError(f"no playbook {name!r} in {self.playbooks}")
        return path

    def tree_hash(self) -> str:
        """sha256 over the relative path and content of every file under playbooks/ and roles/."""
        return files_hash(self.root, self.playbooks, self.roles)


def files_hash(root: Path, *tops: Path) -> str:
    """sha256 over the path (relative to `root`) and content of every file under `tops`."""
    digest = hashlib.sha256()
    for top in tops:
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
        for path in files:
            rel = path.relative_to(root)
            if _IGNORED_PARTS.intersection(rel.parts) or path.suffix in _IGNORED_SUFFIXES:
                continue
            digest.update(rel.as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


DEFAULT_PROJECT = Project(REPO)
