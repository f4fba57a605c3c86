"""Every string flashfleet hands to Ansible is data, never a template: real ansible-runner runs
(this machine through `ansible_connection: local`) that render the sglang_serve role's real unit
template and the weights request's expression from an inventory whose values carry Jinja,
as the stack's `extra_args`, a lock's revision and commit and an extra variable would bring it
when the spec's own check is bypassed (a hand-written inventory, an older flashfleet's lock)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.inert_vars import inert_yaml
from flashfleet.bringup.playbook_run import run_playbook
from flashfleet.bringup.project import REPO

from .inventories import inventory, local_host

SECRET = "controller-secret-0123456789abcdef"

# The finding's routes, each a string Ansible would evaluate on the controller if it trusted it.
PWN = "{{ lookup('pipe', 'touch @TARGET@') }}"
STEAL = "{{ lookup('env', 'FLASHFLEET_TEST_SECRET') }}"
BLOCK = "{% for x in [1] %}{{ lookup('pipe', 'touch @TARGET@') }}{% endfor %}{# c #}"


def aimed(template: str, target: Path) -> str:
    return template.replace("@TARGET@", str(target))


PLAYBOOK = """
- name: Render what a node is told
  hosts: flashfleet
  gather_facts: false
  vars_files:
    - {roles}/sglang_serve/defaults/main.yml
    - {roles}/sglang_serve/vars/main.yml
  vars:
    model_weights_revision: "{{{{ flashfleet_weights_client.revision }}}}"
    model_weights_lock: "{{{{ flashfleet_weights_lock | default({{}}) }}}}"
  tasks:
    - name: Unit | the launches, as serve.yml maps them (over the role's defaults)
      ansible.builtin.set_fact:
        sglang_serve_launches: "{{{{ flashfleet_processes }}}}"
    - name: Unit | the role's own template
      ansible.builtin.template:
        src: {roles}/sglang_serve/templates/container.service.j2
        dest: "{out}/{{{{ inventory_hostname }}}}-{{{{ __launch.container_name }}}}.service"
        mode: "0600"
      loop: "{{{{ sglang_serve_launches }}}}"
      loop_control: {{loop_var: __launch}}
    - name: Weights | the download request, as model_weights builds it
      ansible.builtin.copy:
        content: >-
          {{{{ {{'revision': model_weights_revision, 'lock': model_weights_lock,
               'extra': flashfleet_test_extra}} | to_json }}}}
        dest: "{out}/{{{{ inventory_hostname }}}}-request.json"
        mode: "0600"
"""


def _project(root: Path, out: Path) -> Path:
    (root / "playbooks").mkdir(parents=True)
    (root / "playbooks" / "render.yml").write_text(PLAYBOOK.format(roles=REPO / "roles", out=out))
    return root


def _hostile_inventory(tmp: Path, pwned: Path) -> dict[str, Any]:
    inv = inventory("inert", {"node0": (local_host(), tmp / "cache")})
    host = inv["all"]["hosts"]["node0"]
    [launch] = host["flashfleet_processes"]
    launch["docker_run"] = [*launch["docker_run"], "--served-model-name", aimed(PWN, pwned), "--x", STEAL]
    host["flashfleet_weights_client"]["revision"] = aimed(PWN, pwned)
    host["flashfleet_weights_lock"] = {
        "zai-org/GLM-5.3-Flash": {
            "revision": aimed(PWN, pwned),
            "commit": STEAL,
            "files": {aimed(PWN, pwned): {"size": 1, "git_oid": "0" * 40}},
        }
    }
    return inv


@pytest.mark.runner  # real ansible-playbook, on this machine only (no test host)
def test_jinja_in_every_route_reaches_the_node_as_its_literal_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLASHFLEET_TEST_SECRET", SECRET)
    pwned, out = tmp_path / "PWNED", tmp_path / "out"
    out.mkdir()
    result = run_playbook(
        "render.yml",
        _hostile_inventory(tmp_path, pwned),
        run_dir=tmp_path / "run",
        extravars={"flashfleet_test_extra": aimed(BLOCK, pwned)},
        project_root=_project(tmp_path / "project", out),
        records=False,
    )
    assert result.ok, result.summary()
    assert not pwned.exists()
    [unit] = out.glob("node0-*.service")
    text = unit.read_text()
    assert SECRET not in text
    assert f'"{aimed(PWN, pwned)}"' in text  # one quoted argument, as the stack wrote it
    assert f'"{STEAL}"' in text
    request = json.loads((out / "node0-request.json").read_text())
    assert SECRET not in json.dumps(request)
    assert request["revision"] == aimed(PWN, pwned)
    assert request["lock"]["zai-org/GLM-5.3-Flash"]["commit"] == STEAL
    assert list(request["lock"]["zai-org/GLM-5.3-Flash"]["files"]) == [aimed(PWN, pwned)]
    assert request["extra"] == aimed(BLOCK, pwned)
    assert SECRET not in "".join(p.read_text() for p in (tmp_path / "run").iterdir() if p.is_file())


@pytest.mark.runner  # real ansible-playbook, on this machine only (no test host)
def test_without_the_marking_the_same_inventory_would_run_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack is real: the same inventory and playbook, handed to Ansible as plain JSON (what
    ansible-runner writes for a dict), creates the file. Guards the test above against passing
    only because the expression could never run here."""
    from flashfleet.bringup import playbook_run

    monkeypatch.setattr(playbook_run, "inert_yaml", json.dumps)
    pwned, out = tmp_path / "PWNED", tmp_path / "out"
    out.mkdir()
    run_playbook(
        "render.yml",
        _hostile_inventory(tmp_path, pwned),
        run_dir=tmp_path / "run",
        extravars={"flashfleet_test_extra": "plain"},
        project_root=_project(tmp_path / "project", out),
        records=False,
    )
    assert pwned.exists()


@pytest.mark.parametrize(
    "value",
    ["{{ x }}", "{% if 1 %}", "line\nbreak", "tab\there", "'quoted' \"twice\"", "é ünïcode", "\x00nul", "yes",
     "0x10", "8", "1.5", "~", "null", "", "=", "2026-12-01", "-", "*alias", "&anchor", "!tag", "a: b", "#c"],
)  # fmt: skip
def test_every_string_reads_back_in_ansible_as_itself_and_never_as_a_template(
    tmp_path: Path, value: str
) -> None:
    """Loaded the way the yaml inventory plugin and `-e @FILE` load a file (trusted as a
    template): each string comes back as the same string, and none is trusted as a template;
    numbers, booleans and null stay what they are."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import is_trusted_as_template

    data = {"all": {"hosts": {value or "h": {"v": value, "n": 3, "b": True, "z": None, "l": [value, 1.5]}}}}
    path = tmp_path / "inventory.yml"
    path.write_text(inert_yaml(data))
    back = DataLoader().load_from_file(str(path), cache="none", trusted_as_template=True)
    assert back == data
    [(key, hvars)] = back["all"]["hosts"].items()
    strings = [key, hvars["v"], hvars["l"][0], *hvars]
    assert all(isinstance(s, str) for s in strings)
    trusted = [s for s in strings if is_trusted_as_template(s)]
    # left untagged only what YAML would read as a number, a boolean, null or a date: no brace
    assert all("{" not in s for s in trusted), trusted
    if "{" in value:
        assert not trusted, trusted
    assert isinstance(hvars["n"], int)
    assert isinstance(hvars["b"], bool)
    assert hvars["z"] is None


@pytest.mark.runner  # real ansible-playbook, on this machine only (no test host)
def test_extra_variables_leave_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-e @FILE`: a value set with `configure -e` is in no argument ansible-runner is given
    (it would put a dict's values on ansible-playbook's command line, which `ps` shows)."""
    import ansible_runner

    out = tmp_path / "out"
    out.mkdir()
    marker = "argv-marker-5f1e2d"
    given: list[dict[str, Any]] = []
    real = ansible_runner.run
    monkeypatch.setattr(ansible_runner, "run", lambda **kw: given.append(kw) or real(**kw))
    result = run_playbook(
        "render.yml",
        inventory("inert", {"node0": (local_host(), tmp_path / "cache")}),
        run_dir=tmp_path / "run",
        extravars={"flashfleet_test_extra": marker},
        project_root=_project(tmp_path / "project", out),
        records=False,
    )
    assert result.ok, result.summary()
    assert json.loads((out / "node0-request.json").read_text())["extra"] == marker
    [kwargs] = given
    assert marker not in repr(kwargs)
