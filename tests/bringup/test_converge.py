"""Converge digests (flashfleet.bringup.converge) and the node-side record script, without hosts:
which inputs each role's digest covers, that secrets enter only as a slow hash, and the check
and record logic of roles/converge/files/converge_state.py on a scratch record."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bringup.converge import CHAIN, ROLES, Secrets, converge_vars, role_inputs, watch_for
from flashfleet.bringup.project import REPO

SCRIPT = REPO / "roles/converge/files/converge_state.py"


def inventory(**facts: Any) -> dict[str, Any]:
    host = {
        "ansible_host": "10.0.0.5",
        "flashfleet_vendor": "nvidia",
        "flashfleet_processes": [{"container_name": "flashfleet-serve"}],
        "flashfleet_tool_calls": True,
        "flashfleet_driver": {"branch": "580"},
        "flashfleet_model_cache_dir": "/data/hf",
        "flashfleet_image": "lmsysorg/sglang:v0.5.23",
        "flashfleet_image_derived": {"ref": "flashfleet/sglang:v0.5.23-tf5.17.0"},
        **facts,
    }
    groups = {"flashfleet": {"hosts": {"n0": {}}}, "vendor_nvidia": {"hosts": {"n0": {}}}}
    return {"all": {"hosts": {"n0": host}, "children": groups}}


def digests(inv: dict[str, Any], extravars: dict[str, Any] | None = None, **secrets: str) -> dict[str, str]:
    out = converge_vars(inv, extravars or {}, project_root=REPO, secrets=Secrets(**secrets))
    return dict(out["hosts"]["n0"]["digests"])


def changed_roles(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {r for r in ROLES if a[r] != b[r]}


def test_each_role_reads_the_facts_its_play_maps() -> None:
    inputs = role_inputs(REPO)
    assert "flashfleet_processes" in inputs["sglang_serve"].facts
    assert "flashfleet_tool_calls" in inputs["verify"].facts
    assert "flashfleet_driver" in inputs["nvidia_driver"].facts
    assert "flashfleet_processes" not in inputs["nvidia_driver"].facts
    # IMEX's node list reads other hosts' addresses: the driver depends on the inventory's shape
    assert inputs["nvidia_driver"].topology
    assert not inputs["sglang_serve"].topology


def test_a_fact_changes_only_the_digests_of_roles_that_read_it() -> None:
    base = digests(inventory())
    assert changed_roles(base, digests(inventory(flashfleet_tool_calls=False))) == {"verify"}
    served = digests(inventory(flashfleet_processes=[{"container_name": "other"}]))
    # (verify then runs too, by the chain rule the node applies: see the script tests below)
    assert changed_roles(base, served) == {"sglang_serve"}
    assert digests(inventory()) == base  # deterministic


def test_run_wide_inputs_change_every_digest() -> None:
    base = digests(inventory())
    assert changed_roles(base, digests(inventory(), {"sglang_serve_ready_poll_s": 3})) == set(ROLES)
    keyed = digests(inventory(), api_key="k" * 32)
    assert changed_roles(base, keyed) == set(ROLES)
    assert digests(inventory(), api_key="k" * 32) == keyed
    # a moved host changes what reads the topology, and nothing else
    moved = inventory()
    moved["all"]["hosts"]["n0"]["ansible_host"] = "10.0.0.6"
    assert changed_roles(base, digests(moved)) == {"nvidia_driver", "mooncake"}  # IMEX list, master group


def test_secrets_enter_only_as_a_slow_salted_hash() -> None:
    key = "correct-horse-battery-staple"
    out = json.dumps(converge_vars(inventory(), {}, project_root=REPO, secrets=Secrets(api_key=key)))
    assert key not in out
    fingerprint = Secrets(api_key=key).fingerprint()
    import hashlib

    assert fingerprint != hashlib.sha256(key.encode()).hexdigest()
    assert Secrets().fingerprint() == ""


def test_chain_follows_site_yml_and_every_role_is_in_a_playbook() -> None:
    site = (REPO / "playbooks/site.yml").read_text()
    books = re.findall(r"import_playbook: (\S+)", site)
    order = [book for _, book, _ in CHAIN]
    assert sorted(set(order), key=order.index) == books
    role_inputs(REPO)  # raises when a chain role has no play


def test_watched_paths_are_the_roles_own() -> None:
    """Each fixed path the drift check reads back appears in its role's files (no stale copy)."""
    watch = watch_for(inventory()["all"]["hosts"]["n0"])
    for role, spec in watch.items():
        text = "\n".join(p.read_text() for p in (REPO / "roles" / role).rglob("*.yml"))
        for path in spec.get("files", []) + spec.get("trees", []):
            if path.startswith("/data/hf") or "/etc/systemd/system/" in path:
                continue  # the stack's cache dir; unit names come from the launches
            assert path in text or Path(path).name in text, (role, path)
        for unit in spec.get("units", []):
            if role == "sglang_serve":
                continue  # the launches' container names (flashfleet.launch)
            assert unit.removesuffix(".service") in text, (role, unit)


def script(request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


CHAIN_REQ = [{"role": "a", "tags": ["a", "prepare"]}, {"role": "b", "tags": ["b", "serve"]}]


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Any]:
    watched = tmp_path / "unit.conf"
    watched.write_text("Restart=always\n")
    return {
        "state_file": str(tmp_path / "state/converge.json"),
        "chain": CHAIN_REQ,
        "digests": {"a": "da", "b": "db"},
        "watch": {"a": {"files": [str(watched)]}, "b": {"trees": [str(tmp_path / "venv")]}},
        "path": watched,
    }


def check(node: dict[str, Any], **more: Any) -> dict[str, Any]:
    req = {k: node[k] for k in ("state_file", "chain", "digests")}
    return script({"mode": "check", **req, **more})


def record(node: dict[str, Any], done: list[str]) -> dict[str, Any]:
    req = {k: node[k] for k in ("state_file", "digests", "watch")}
    return script({"mode": "record", **req, "done": done})


def test_record_then_skip_then_drift(node: dict[str, Any]) -> None:
    first = check(node)
    assert first["run"] == ["a", "b"]
    assert first["reasons"]["a"] == "never converged here"
    assert record(node, ["a", "b"]) == {"recorded": ["a", "b"]}
    assert oct(Path(node["state_file"]).stat().st_mode & 0o777) == "0o600"
    again = check(node)
    assert again["run"] == []
    assert again["skip"] == ["a", "b"]
    node["path"].write_text("Restart=no\n")  # a hand edit
    drift = check(node)
    assert drift["run"] == ["a", "b"]
    assert drift["reasons"]["a"].startswith("drift: file ")
    assert str(node["path"]) in drift["reasons"]["a"]


def test_changed_digest_runs_that_role_and_those_after(node: dict[str, Any]) -> None:
    record(node, ["a", "b"])
    node["digests"] = {"a": "da", "b": "db2"}
    out = check(node)
    assert out["run"] == ["b"]
    assert out["reasons"] == {"b": "its inputs changed"}
    node["digests"] = {"a": "da2", "b": "db"}
    assert check(node)["run"] == ["a", "b"]


def test_roles_about_to_run_lose_their_record_at_once(node: dict[str, Any]) -> None:
    """A run that fails half-way must not leave a record claiming those roles converged."""
    record(node, ["a", "b"])
    node["digests"] = {"a": "da", "b": "db2"}
    check(node)
    assert set(json.loads(Path(node["state_file"]).read_text())) == {"a"}
    # check mode reports without touching the record
    node["digests"] = {"a": "da2", "b": "db2"}
    check(node, check_mode=True)
    assert set(json.loads(Path(node["state_file"]).read_text())) == {"a"}


def test_tags_limit_the_chain_and_reconverge_runs_everything(node: dict[str, Any]) -> None:
    record(node, ["b"])
    assert check(node, run_tags=["serve"])["run"] == []
    assert check(node, run_tags=["all"], skip_tags=["serve"])["run"] == ["a"]
    assert check(node, run_tags=["serve"], reconverge=True)["run"] == ["b"]


def test_facts_are_gathered_for_every_role_that_reads_them() -> None:
    """converge_check.yml gathers facts only where a role that reads them will run."""
    check = yaml.safe_load((REPO / "playbooks/converge_check.yml").read_text())
    [gather] = [t for t in check[0]["tasks"] if "ansible.builtin.setup" in t]
    readers = set(gather["vars"]["_readers"])
    reading = {
        role
        for role in ROLES
        if any("ansible_facts" in p.read_text() for p in (REPO / "roles" / role).rglob("*.yml"))
    }
    assert reading <= readers, reading - readers


def test_the_role_default_chain_is_pythons() -> None:
    """A plain ansible-playbook run (no digests) walks the role's default chain: the same one."""
    defaults = yaml.safe_load((REPO / "roles/converge/defaults/main.yml").read_text())
    assert defaults["converge_chain"] == [{"role": role, "tags": [role, tag]} for role, _, tag in CHAIN]


def test_a_playbook_run_alone_reaches_only_its_own_roles(node: dict[str, Any]) -> None:
    """prepare.yml alone must not wait on serve's roles: they are not in its reach."""
    record(node, ["a"])
    assert check(node, reach=["a"])["run"] == []
    assert check(node)["run"] == ["b"]  # site.yml reaches b, never converged here
    assert converge_vars(inventory(), {}, project_root=REPO, secrets=Secrets(), playbook="serve.yml")[
        "reach"
    ] == ["sglang_serve"]


def test_a_virtualenv_drifts_when_its_distributions_change(node: dict[str, Any], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "lib/python3.11/site-packages/mooncake-0.3.7.dist-info").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib/python3.11/site-packages/big.py").write_text("x = 1\n")
    record(node, ["a", "b"])
    (venv / "lib/python3.11/site-packages/big.py").write_text("x = 2\n")  # not a distribution change
    assert check(node)["run"] == []
    (venv / "lib/python3.11/site-packages/mooncake-0.3.7.dist-info").rename(
        venv / "lib/python3.11/site-packages/mooncake-0.3.8.dist-info"
    )
    out = check(node)
    assert out["run"] == ["b"]
    assert out["reasons"]["b"] == f"drift: tree {venv}"
