"""Converge records: skip on a node what is provably unchanged since its last converge.

A re-run that changes nothing is what users do most, and Ansible's own idempotence still runs
every task (about 0.2 s each, ~70 of them). So each role of the bring-up chain gets, per node, a
digest of everything it is given: the role's files, the playbook that maps its arguments, the
inventory facts that play reads, the run's extra variables, the controller's secrets (as a slow
salted hash, so the key can be rotated) and ansible-core's version. The `converge` role records
the digests on the node after a playbook completes there, with a snapshot of what the role
manages (files, packages, units, images: `watch`). A later run skips a role when its digest and
its snapshot are both unchanged, so a hand-edited unit or a stopped service is still caught
(drift), and once one role of the chain runs on a node, every later one runs too.

Pure apart from reading the project's files; `run_playbook` hands the result to the playbooks as
the extra variable `flashfleet_converge`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from flashfleet.bringup.hashes import content_hash
from flashfleet.bringup.playbook_walk import role_uses
from flashfleet.bringup.project import Project, files_hash

# The bring-up chain in site.yml's order: (role, playbook that runs it, site.yml's tag for it).
CHAIN: tuple[tuple[str, str, str], ...] = (
    ("preflight", "prepare.yml", "prepare"),
    ("nvidia_driver", "prepare.yml", "prepare"),
    ("rocm_driver", "prepare.yml", "prepare"),
    ("container_runtime", "prepare.yml", "prepare"),
    ("sglang_image", "prepare.yml", "prepare"),
    ("model_weights", "prepare.yml", "prepare"),
    ("mooncake", "mooncake.yml", "mooncake"),
    ("sglang_serve", "serve.yml", "serve"),
    ("verify", "verify.yml", "verify"),
)
ROLES = tuple(role for role, _, _ in CHAIN)
# The playbooks that carry the converge check and record (site.yml imports them all).
BRINGUP_PLAYBOOKS = frozenset({"site.yml", *(book for _, book, _ in CHAIN)})

_FACT = re.compile(r"\bflashfleet_\w+")
# A play that reads other hosts' facts (groups[...], hostvars[...]) depends on the inventory's shape.
_TOPOLOGY = re.compile(r"\b(groups|hostvars)\s*\[")
# Digest inputs that are not stack facts: the converge variable itself, connection details.
_NOT_INPUTS = {"flashfleet_converge"}

# What each role manages on a node, as the drift check reads it back: file contents (sha256,
# directories recursively), trees (names, sizes and times only: virtualenvs), dpkg packages by
# pattern, systemd units (active and enabled state), docker images. The paths are the roles'
# own (tests/bringup/test_converge.py::test_watched_paths_are_the_roles_own keeps them in step).
_WATCH: dict[str, dict[str, list[str]]] = {
    "nvidia_driver": {
        "files": [
            "/etc/apt/sources.list.d/nvidia-cuda.sources",
            "/etc/apt/preferences.d/nvidia-driver.pref",
            "/etc/modprobe.d/nvidia-imex-channel.conf",
            "/etc/nvidia-imex/nodes_config.cfg",
        ],
        "packages": ["nvidia-*", "libnvidia-*", "cuda-drivers*"],
        "units": ["nvidia-persistenced.service", "nvidia-fabricmanager.service", "nvidia-imex.service"],
    },
    "rocm_driver": {
        "files": ["/etc/apt/sources.list.d/rocm.sources", "/etc/apt/preferences.d/rocm-pin-600"],
        "packages": ["amdgpu-*", "rocm*", "amd-smi*"],
    },
    "container_runtime": {
        "files": [
            "/etc/docker/daemon.json",
            "/etc/apt/sources.list.d/docker.sources",
            "/etc/apt/sources.list.d/nvidia-container-toolkit.sources",
            "/etc/cdi/nvidia.yaml",
        ],
        "packages": ["docker-ce*", "containerd*", "nvidia-container-*", "libnvidia-container*"],
        "units": ["docker.service", "containerd.service"],
    },
    "mooncake": {
        "files": ["/etc/flashfleet/mooncake", "/etc/sysctl.d/60-flashfleet-mooncake.conf"],
        "trees": ["/opt/flashfleet/mooncake"],
        "units": ["mooncake-master.service"],
    },
}


def carries_records(project_root: Path, playbook: str) -> bool:
    """Whether `playbook` of this project is a bring-up playbook with the converge check (a
    project of one's own without the chain's playbooks runs every role, as plain Ansible does)."""
    books = {book for _, book, _ in CHAIN}
    return (
        playbook in BRINGUP_PLAYBOOKS
        and all((project_root / "playbooks" / b).is_file() for b in books)
        and (project_root / "roles/converge").is_dir()
    )


@dataclass(frozen=True)
class Secrets:
    """The controller's secrets as they enter the digests: never the values themselves."""

    hf_token: str | None = None
    api_key: str | None = None

    def fingerprint(self) -> str:
        # scrypt, not sha256: a weak API key must not be recoverable from a record or an event.
        parts = [s or "" for s in (self.hf_token, self.api_key)]
        if not any(parts):
            return ""
        raw = "\0".join(parts).encode()
        return hashlib.scrypt(raw, salt=b"flashfleet-converge", n=2**14, r=8, p=1, dklen=32).hex()


@dataclass(frozen=True)
class PlayInputs:
    """What the play that runs a role reads: its stack facts, and whether other hosts' too."""

    facts: frozenset[str]
    topology: bool
    playbook_text: str


def role_inputs(project_root: Path) -> dict[str, PlayInputs]:
    """Per role, the flashfleet_* facts its play reads (play vars, pre_tasks and tasks, the
    `roles:` item or import_role/include_role task that applies it; a role split over plays,
    like the weights download started early and waited for later, reads the facts of both)."""
    project = Project(project_root)
    out: dict[str, PlayInputs] = {}
    for playbook in dict.fromkeys(book for _, book, _ in CHAIN):
        text = project.playbook(playbook).read_text(encoding="utf-8")
        for use in role_uses(project, playbook):
            if use.playbook != playbook or use.role not in ROLES:
                continue  # an imported playbook's plays (the converge role's own) are not inputs
            shared = {k: v for k, v in use.play_source.items() if k not in {"roles", "name", "post_tasks"}}
            read = json.dumps([shared, use.source], default=str)
            seen = out.get(use.role)
            facts = frozenset(_FACT.findall(read)) - _NOT_INPUTS | (seen.facts if seen else frozenset())
            topology = bool(_TOPOLOGY.search(read)) or (seen.topology if seen else False)
            out[use.role] = PlayInputs(facts, topology, text)
    missing = [r for r in ROLES if r not in out]
    if missing:
        raise ValueError(f"playbooks run no play for roles {missing}: the converge chain is out of date")
    return out


def _topology(inventory: Mapping[str, Any]) -> dict[str, Any]:
    root = inventory.get("all", {})
    return {
        "hosts": {h: v.get("ansible_host") for h, v in (root.get("hosts") or {}).items()},
        "groups": {g: sorted(m.get("hosts") or {}) for g, m in (root.get("children") or {}).items()},
    }


def _groups_of(inventory: Mapping[str, Any], host: str) -> list[str]:
    children = inventory.get("all", {}).get("children") or {}
    return sorted(g for g, m in children.items() if host in (m.get("hosts") or {}))


def watch_for(hostvars: Mapping[str, Any]) -> dict[str, dict[str, list[str]]]:
    """Per role, what its drift check reads back on this node."""
    watch = {role: dict(_WATCH.get(role, {})) for role in ROLES}
    images = [hostvars.get("flashfleet_image")]
    derived = hostvars.get("flashfleet_image_derived")
    if isinstance(derived, Mapping):
        images.append(derived.get("ref"))
    watch["sglang_image"] = {"images": [i for i in images if isinstance(i, str) and i]}
    cache = hostvars.get("flashfleet_model_cache_dir")
    if isinstance(cache, str) and cache:
        # The markers only: the download job installs its client when it has something to
        # download, so a changed client venv is nothing a re-run would repair.
        watch["model_weights"] = {"files": [f"{cache}/.flashfleet-complete"]}
    units = [
        f"{p['container_name']}.service"
        for p in hostvars.get("flashfleet_processes") or []
        if isinstance(p, Mapping) and isinstance(p.get("container_name"), str)
    ]
    watch["sglang_serve"] = {
        "files": [
            "/etc/flashfleet/secrets.env",
            "/etc/flashfleet/api-key.yaml",
            "/usr/local/libexec/flashfleet/wait-ready",
            *(f"/etc/systemd/system/{u}" for u in units),
        ],
        "units": units,
    }
    return {role: spec for role, spec in watch.items() if spec}


def reach(playbook: str) -> list[str]:
    """The chain's roles a run of `playbook` reaches (site.yml: all of them)."""
    return [role for role, book, _ in CHAIN if playbook in {"site.yml", book}]


def converge_vars(
    inventory: Mapping[str, Any],
    extravars: Mapping[str, Any],
    *,
    project_root: Path,
    secrets: Secrets,
    playbook: str = "site.yml",
    reconverge: bool = False,
) -> dict[str, Any]:
    """The `flashfleet_converge` extra variable: per host its digests and watch (the chain itself
    is the converge role's default, kept equal to CHAIN by
    tests/bringup/test_converge.py::test_the_role_default_chain_is_pythons)."""
    inputs = role_inputs(project_root)
    ansible = metadata.version("ansible-core")
    common = {
        "ansible": ansible,
        "extravars": {k: v for k, v in extravars.items() if k not in _NOT_INPUTS},
        "secrets": secrets.fingerprint(),
    }
    roles = project_root / "roles"
    role_files = {role: files_hash(roles, roles / role) for role in ROLES}
    converge_files = files_hash(roles, roles / "converge")
    topology = _topology(inventory)
    hosts: dict[str, Any] = {}
    for host, hostvars in (inventory.get("all", {}).get("hosts") or {}).items():
        groups = _groups_of(inventory, host)
        digests = {}
        for role in ROLES:
            play = inputs[role]
            digests[role] = content_hash(
                {
                    **common,
                    "role": [role, role_files[role], converge_files],
                    "playbook": hashlib.sha256(play.playbook_text.encode()).hexdigest(),
                    "facts": {k: hostvars.get(k) for k in sorted(play.facts)},
                    "groups": groups,
                    "topology": topology if play.topology else None,
                }
            )
        hosts[host] = {"digests": digests, "watch": watch_for(hostvars)}
    return {
        "reach": reach(playbook),
        "reconverge": reconverge,
        "hosts": hosts,
    }
