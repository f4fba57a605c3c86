"""Converge records without hosts: the controller's salt (flashfleet.bringup.converge), the shape
every bring-up play keeps (one role, its arguments in the play's vars, the converge check in its
pre_tasks and the record in its post_tasks; what the role manages in its own `_<role>_watch`), and
the node-side record script (roles/converge/files/converge_state.py) on a scratch record.
tests/bringup/test_converge_runs.py runs the converge role itself; tests/serve/test_site.py the
whole chain on test hosts."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bringup.converge import Secrets, carries_records, converge_vars
from flashfleet.bringup.playbook_walk import role_uses
from flashfleet.bringup.project import DEFAULT_PROJECT, REPO

SCRIPT = REPO / "roles/converge/files/converge_state.py"
BRINGUP = ("prepare.yml", "mooncake.yml", "serve.yml", "verify.yml")  # what site.yml imports
CHECK = {"name": "converge", "tasks_from": "check", "rolespec_validate": False}
OPEN = {**CHECK, "tasks_from": "open"}  # a playbook's first play: the node's record is read there
RECORD = {"name": "converge", "tasks_from": "record", "rolespec_validate": False}


def bringup_plays() -> list[tuple[str, dict[str, Any]]]:
    return [
        (book, play) for book in BRINGUP for play in yaml.safe_load((REPO / "playbooks" / book).read_text())
    ]


def applied(play: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(role, entry point, the item or task's own vars) for each role the play applies."""
    out = [(str(item["role"]), "main", dict(item.get("vars") or {})) for item in play.get("roles") or []]
    for task in play.get("tasks") or []:
        target = task.get("ansible.builtin.import_role")
        if target:
            out.append(
                (str(target["name"]), str(target.get("tasks_from", "main")), dict(task.get("vars") or {}))
            )
    return out


def bringup_entries() -> dict[str, set[str]]:
    """Every role site.yml applies, with the entry points (task files) it applies."""
    out: dict[str, set[str]] = {}
    for use in role_uses(DEFAULT_PROJECT, "site.yml"):
        if use.role != "converge":
            out.setdefault(use.role, set()).add(use.entry)
    return out


def tasks(role: str, entry: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((REPO / "roles" / role / "tasks" / f"{entry}.yml").read_text()))


def test_the_salt_covers_each_roles_files_and_the_run_wide_inputs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "roles", project / "roles")
    base = converge_vars(project, secrets=Secrets())
    assert base["reconverge"] is False
    assert set(base["salt"]) == {p.name for p in (REPO / "roles").iterdir() if p.is_dir()}
    assert converge_vars(project, secrets=Secrets()) == base  # deterministic
    (project / "roles/verify/defaults/main.yml").write_text("---\nverify_image: false\n")
    edited = converge_vars(project, secrets=Secrets())["salt"]
    assert {r for r in base["salt"] if base["salt"][r] != edited[r]} == {"verify"}
    # a role included by others' tasks (apt_lock checks apt for three roles) acts for each of them
    (project / "roles/apt_lock/files/apt_lock_check.py").write_text("print('{}')\n")
    shared = converge_vars(project, secrets=Secrets())["salt"]
    changed = {r for r in edited if edited[r] != shared[r]}
    assert changed == {"apt_lock", "nvidia_driver", "container_runtime", "rocm_driver"}
    edited = shared
    (project / "roles/converge/tasks/check.yml").write_text("---\n[]\n")
    converge_edited = converge_vars(project, secrets=Secrets())["salt"]
    assert all(converge_edited[r] != edited[r] for r in edited)  # the check is every role's
    keyed = converge_vars(project, secrets=Secrets(api_key="k" * 32))["salt"]
    assert all(keyed[r] != converge_edited[r] for r in keyed)  # a rotated key re-runs everything
    assert converge_vars(project, secrets=Secrets(), reconverge=True)["reconverge"] is True


def test_secrets_enter_only_as_a_slow_salted_hash() -> None:
    key = "correct-horse-battery-staple"
    out = json.dumps(converge_vars(REPO, secrets=Secrets(api_key=key)))
    assert key not in out
    fingerprint = Secrets(api_key=key).fingerprint()
    assert fingerprint != hashlib.sha256(key.encode()).hexdigest()
    assert fingerprint not in out  # it enters each role's salt, hashed again
    assert Secrets().fingerprint() == ""


def test_a_project_without_the_converge_role_keeps_no_record(tmp_path: Path) -> None:
    assert carries_records(REPO)
    (tmp_path / "roles/other/tasks").mkdir(parents=True)
    assert not carries_records(tmp_path)


def test_every_bringup_play_applies_one_role_between_the_check_and_the_record() -> None:
    roles = []
    books: list[str] = []
    for book, play in bringup_plays():
        [(role, _, own_vars)] = applied(play)
        roles.append(role)
        where = (book, play["name"])
        assert play["tags"] == [role], where  # the check and the record are the role's, tags and all
        first = book not in books
        books.append(book)
        assert play["pre_tasks"][-1]["ansible.builtin.import_role"] == (OPEN if first else CHECK), where
        assert [t["ansible.builtin.import_role"] for t in play["post_tasks"]] == [RECORD], where
        # what the role is given is the play's vars, where the check reads it too
        assert own_vars == {}, where
        assert all(k.startswith(("_", f"{role}_", "converge_")) for k in play.get("vars") or {}), where
    assert roles == [
        "preflight", "model_weights", "nvidia_driver", "rocm_driver", "container_runtime", "sglang_image",
        "model_weights", "mooncake", "sglang_serve", "sglang_serve", "verify",
    ]  # fmt: skip


def test_a_role_split_over_plays_decides_in_its_first_part_and_records_in_its_rest() -> None:
    parts: dict[str, list[str]] = {}
    for _, play in bringup_plays():
        [(role, _, _)] = applied(play)
        parts.setdefault(role, []).append((play.get("vars") or {}).get("converge_part", ""))
    assert parts.pop("model_weights") == ["first", "rest"]
    assert parts.pop("sglang_serve") == ["first", "rest"]
    assert all(p == [""] for p in parts.values()), parts


def test_a_role_that_reads_platform_facts_gathers_them_where_it_runs() -> None:
    for role, points in bringup_entries().items():
        files = [*(REPO / "roles" / role).rglob("*.yml"), *(REPO / "roles" / role).rglob("*.j2")]
        # the disks (model_weights' volume.yml) are gathered by the tasks that read them, below
        reads = any(re.search(r"ansible_facts(?!\.devices)", p.read_text()) for p in files)
        for entry in points:
            first = tasks(role, entry)[0]
            gathers = "ansible.builtin.setup" in first
            assert gathers == reads, (role, entry)
            if gathers:
                assert first["ansible.builtin.setup"] == {"gather_subset": ["min"]}
                assert first["when"] == "ansible_facts['distribution'] is not defined"


def test_the_disks_are_gathered_by_the_tasks_that_read_them() -> None:
    readers = [p for p in (REPO / "roles").rglob("*.yml") if "ansible_facts.devices" in p.read_text()]
    assert readers == [REPO / "roles" / "model_weights" / "vars" / "main.yml"]
    first = yaml.safe_load((REPO / "roles" / "model_weights" / "tasks" / "volume.yml").read_text())[0]
    assert first["ansible.builtin.setup"]["filter"] == ["ansible_devices"]


def test_what_a_role_watches_is_its_own() -> None:
    """Each watched path a role names is one its own tasks write, and each variable one it has."""
    watched = {}
    for role in bringup_entries():
        vars_file = REPO / "roles" / role / "vars/main.yml"
        watch = (
            (yaml.safe_load(vars_file.read_text()) or {}).get(f"_{role}_watch")
            if vars_file.is_file()
            else None
        )
        if watch is None:
            continue
        watched[role] = watch
        own = "\n".join(p.read_text() for p in (REPO / "roles" / role).rglob("*") if p.is_file())
        for kind, entries in watch.items():
            assert kind in {"files", "trees", "packages", "units", "images"}, (role, kind)
            for entry in [entries] if isinstance(entries, str) else entries:
                if "{{" in entry:  # from the role's own variables
                    for name in set(re.findall(r"\b_?" + role + r"_\w+", entry)):
                        assert f"{name}:" in own, (role, name)
                elif kind == "files":
                    assert entry in own or Path(entry).name in own, (role, entry)
                elif kind == "units":
                    assert entry.removesuffix(".service") in own, (role, entry)
    assert set(watched) == {"nvidia_driver", "rocm_driver", "container_runtime", "sglang_image",
                            "model_weights", "mooncake", "sglang_serve"}  # fmt: skip


def script(request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Any]:
    watched = tmp_path / "unit.conf"
    watched.write_text("Restart=always\n")
    return {
        "state_file": str(tmp_path / "state/converge.json"),
        "watch": {"a": {"files": [str(watched)]}, "b": {"trees": [str(tmp_path / "venv")]}, "c": {}},
        "path": watched,
    }


def read(node: dict[str, Any]) -> dict[str, Any]:
    return script({"mode": "read", "state_file": node["state_file"]})


def record(node: dict[str, Any], *roles: str) -> None:
    for role in roles:
        req = {"mode": "record", "state_file": node["state_file"], "role": role}
        script({**req, "digest": f"d{role}", "watch": node["watch"][role]})


def drop(node: dict[str, Any], role: str) -> bool:
    return bool(script({"mode": "drop", "state_file": node["state_file"], "role": role})["dropped"])


def test_record_then_read_then_drift(node: dict[str, Any]) -> None:
    assert read(node) == {}  # never converged here
    record(node, "a", "b")
    assert read(node) == {"a": {"digest": "da", "drift": ""}, "b": {"digest": "db", "drift": ""}}
    assert oct(Path(node["state_file"]).stat().st_mode & 0o777) == "0o600"
    node["path"].write_text("Restart=no\n")
    assert read(node)["a"]["drift"] == f"file {node['path']}"
    record(node, "a")  # converged again: a fresh snapshot
    assert read(node)["a"]["drift"] == ""


def test_a_role_about_to_run_loses_its_record(node: dict[str, Any]) -> None:
    record(node, "a", "b")
    assert drop(node, "a") is True
    assert list(read(node)) == ["b"]
    assert drop(node, "a") is False  # nothing recorded for it


def test_a_record_of_another_shape_is_no_record(node: dict[str, Any]) -> None:
    """A record an older flashfleet wrote (roles at the top level) reads as none: every role runs."""
    Path(node["state_file"]).parent.mkdir(parents=True)
    Path(node["state_file"]).write_text(json.dumps({"a": {"digest": "da", "watch": {}, "snapshot": {}}}))
    assert read(node) == {}
    Path(node["state_file"]).write_text("not json")
    assert read(node) == {}


def test_a_virtualenv_drifts_when_its_distributions_change(node: dict[str, Any], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "lib/python3.11/site-packages/mooncake-0.3.7.dist-info").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib/python3.11/site-packages/big.py").write_text("x = 1\n")
    record(node, "a", "b")
    (venv / "lib/python3.11/site-packages/big.py").write_text("x = 2\n")  # not a distribution change
    assert read(node)["b"]["drift"] == ""
    (venv / "lib/python3.11/site-packages/mooncake-0.3.7.dist-info").rename(
        venv / "lib/python3.11/site-packages/mooncake-0.3.8.dist-info"
    )
    assert read(node)["b"]["drift"] == f"tree {venv}"
