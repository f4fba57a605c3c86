"""The converge record through real ansible-runner runs on this machine: the repository's own
`converge` role around small roles, in plays built the way the bring-up plays are (one role a
play, its arguments in the play's vars, the check in its pre_tasks and the record in its
post_tasks, what it manages in `_<role>_watch`), in a scratch project, with the record in a
scratch file. What the bring-up roles watch, and the whole chain on real test hosts, is
tests/serve/test_site.py's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.playbook_run import Progress, RunResult, run_playbook
from flashfleet.bringup.project import REPO

pytestmark = pytest.mark.runner

# A role that writes one file from its argument, and may be told to fail.
WRITER = """---
- name: {title} | its file
  ansible.builtin.copy:
    content: "{{{{ {role}_value }}}}\\n"
    dest: "{{{{ {role}_path }}}}"
    mode: "0644"

- name: {title} | fail when told to
  ansible.builtin.fail:
    msg: told to
  when: {role}_fail
"""
# A role with two entry points, plays apart (as the weights download starts, then is waited for).
SPLIT_START = """---
- name: Gamma | start
  ansible.builtin.copy:
    content: "{{ gamma_value }}\\n"
    dest: "{{ gamma_path }}"
    mode: "0644"
"""
SPLIT_WAIT = """---
- name: Gamma | wait
  ansible.builtin.command:
    argv: [cat, "{{ gamma_path }}"]
  changed_when: false
"""
CHECK = "{name: converge, tasks_from: check, rolespec_validate: false}"
OPEN = "{name: converge, tasks_from: open, rolespec_validate: false}"  # the first play: reads the record
RECORD = "{name: converge, tasks_from: record, rolespec_validate: false}"
SITE = f"""---
- name: Site | gamma starts
  hosts: all
  gather_facts: false
  tags: [gamma]
  vars:
    converge_part: first
  pre_tasks:
    - name: Site | check gamma
      ansible.builtin.import_role: {OPEN}
  tasks:
    - name: Site | start gamma
      ansible.builtin.import_role:
        name: gamma
        tasks_from: start
  post_tasks:
    - name: Site | gamma started
      ansible.builtin.import_role: {RECORD}

- name: Site | alpha
  hosts: all
  gather_facts: false
  tags: [alpha]
  vars:
    alpha_value: "{{{{ value_for_alpha }}}}"
  pre_tasks:
    - name: Site | check alpha
      ansible.builtin.import_role: {CHECK}
  roles:
    - role: alpha
  post_tasks:
    - name: Site | record alpha
      ansible.builtin.import_role: {RECORD}

- name: Site | beta
  hosts: all
  gather_facts: false
  tags: [beta]
  vars:
    # an argument two variables away from what it renders from (an extra variable), and one read
    # through a lookup: the check renders no template but the lookup's
    _beta_words: {{first: "{{{{ word_for_beta }}}}", env: "{{{{ lookup('ansible.builtin.env', 'FLASHFLEET_TEST_WORD') }}}}"}}
    beta_value: "{{{{ _beta_words.first }}}}{{{{ _beta_words.env }}}}"
  pre_tasks:
    - name: Site | check beta
      ansible.builtin.import_role: {CHECK}
  roles:
    - role: beta
  post_tasks:
    - name: Site | record beta
      ansible.builtin.import_role: {RECORD}

- name: Site | gamma is waited for
  hosts: all
  gather_facts: false
  tags: [gamma]
  vars:
    converge_part: rest
  pre_tasks:
    - name: Site | check gamma again
      ansible.builtin.import_role: {CHECK}
  tasks:
    - name: Site | wait for gamma
      ansible.builtin.import_role:
        name: gamma
        tasks_from: wait
  post_tasks:
    - name: Site | record gamma
      ansible.builtin.import_role: {RECORD}
"""


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "project"
    shutil.copytree(REPO / "roles/converge", root / "roles/converge")
    files = tmp_path / "node"
    files.mkdir()
    for role in ("alpha", "beta", "gamma"):
        title = role.capitalize()
        (root / f"roles/{role}/tasks").mkdir(parents=True)
        (root / f"roles/{role}/defaults").mkdir()
        (root / f"roles/{role}/vars").mkdir()
        (root / f"roles/{role}/defaults/main.yml").write_text(
            f"---\n{role}_value: one\n{role}_path: {files / role}\n{role}_fail: false\n"
        )
        (root / f"roles/{role}/vars/main.yml").write_text(
            f'---\n_{role}_watch:\n  files: ["{{{{ {role}_path }}}}"]\n'
        )
        if role == "gamma":
            (root / "roles/gamma/tasks/start.yml").write_text(SPLIT_START)
            (root / "roles/gamma/tasks/wait.yml").write_text(SPLIT_WAIT)
        else:
            (root / f"roles/{role}/tasks/main.yml").write_text(WRITER.format(role=role, title=title))
    (root / "playbooks").mkdir()
    (root / "playbooks/site.yml").write_text(SITE)
    return {
        "root": root,
        "files": files,
        "record": tmp_path / "record/converge.json",
        "runs": tmp_path / "runs",
    }


NODE_COMMANDS = {
    "what changed on this node since its last converge",
    "forget the role's record before it runs",
    "record that the role converged on this node",
}


class Run:
    def __init__(self, result: RunResult, progress: list[Progress]) -> None:
        self.result, self.progress = result, progress

    @property
    def ran(self) -> list[str]:
        """The roles that ran a task of their own (not the converge role's), in order."""
        out: list[str] = []
        for p in self.progress:
            if p.role not in ("", "converge") and p.status != "skipped" and p.role not in out:
                out.append(p.role)
        return out

    def node_commands(self) -> list[str]:
        """The converge role's tasks that ran a command on the node."""
        return [p.task for p in self.progress if p.role == "converge" and p.status != "skipped"
                and p.task in NODE_COMMANDS]  # fmt: skip


def run(project: dict[str, Any], *, records: bool = True, **kwargs: Any) -> Run:
    extravars = {"value_for_alpha": "one", "word_for_beta": "one", "converge_state_file": str(project["record"]),
                 **kwargs.pop("extravars", {})}  # fmt: skip
    inventory = {"all": {"hosts": {"node": {"ansible_connection": "local",
                                            "ansible_python_interpreter": "/usr/bin/python3"}}}}  # fmt: skip
    progress: list[Progress] = []
    count = len(list(project["runs"].glob("*"))) if project["runs"].exists() else 0
    result = run_playbook(
        "site.yml", inventory, run_dir=project["runs"] / str(count), extravars=extravars,
        project_root=project["root"], on_progress=progress.append, records=records, **kwargs,
    )  # fmt: skip
    return Run(result, progress)


def record(project: dict[str, Any]) -> dict[str, Any]:
    return json.loads(project["record"].read_text())


def test_a_rerun_skips_every_role_after_one_command(project: dict[str, Any]) -> None:
    first = run(project)
    assert first.result.ok, first.result.summary()
    assert first.ran == ["gamma", "alpha", "beta"]
    assert set(record(project)["roles"]) == {"alpha", "beta", "gamma"}
    assert oct(project["record"].stat().st_mode & 0o777) == "0o600"
    again = run(project)
    assert again.result.ok
    assert again.ran == []
    assert again.result.count("changed") == 0
    assert again.node_commands() == ["what changed on this node since its last converge"]


def test_a_changed_argument_reruns_that_role_and_the_roles_after_it(project: dict[str, Any]) -> None:
    run(project)
    changed = run(project, extravars={"value_for_alpha": "two"})
    assert changed.ran == ["alpha", "beta"]  # gamma decided at its start, before alpha ran
    assert (project["files"] / "alpha").read_text() == "two\n"
    assert run(project, extravars={"value_for_alpha": "two"}).ran == []
    assert run(project, extravars={"value_for_alpha": "two", "beta_value": "x"}).ran == ["beta"]


def test_an_argument_follows_the_variables_it_renders_from(
    project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(project)
    assert run(project, extravars={"word_for_beta": "two"}).ran == ["beta"]
    assert (project["files"] / "beta").read_text() == "two\n"
    assert run(project, extravars={"word_for_beta": "two", "unrelated": "x"}).ran == []
    monkeypatch.setenv("FLASHFLEET_TEST_WORD", "-three")
    assert run(project, extravars={"word_for_beta": "two"}).ran == ["beta"]
    assert (project["files"] / "beta").read_text() == "two-three\n"


def test_drift_in_what_a_role_manages_reruns_it(project: dict[str, Any]) -> None:
    run(project)
    (project["files"] / "beta").write_text("edited by hand\n")
    fixed = run(project)
    assert fixed.ran == ["beta"]
    assert (project["files"] / "beta").read_text() == "one\n"
    (project["files"] / "gamma").unlink()
    assert run(project).ran == ["gamma"]  # it records at its wait, after alpha and beta decided


def test_a_role_that_fails_runs_again_and_the_roles_after_it_too(project: dict[str, Any]) -> None:
    run(project)
    before = record(project)["roles"]
    # alpha's inputs changed and it fails: its record (of the old inputs) stays, and the next
    # run runs it again, and beta after it
    failed = run(project, extravars={"value_for_alpha": "two", "alpha_fail": True})
    assert not failed.result.ok
    assert record(project)["roles"]["alpha"] == before["alpha"]
    # alpha converges, and beta, which runs because alpha ran, fails: beta's record, still of its
    # own inputs, went before it ran, so the next run runs it although alpha does not
    failed = run(project, extravars={"value_for_alpha": "two", "beta_fail": True})
    assert not failed.result.ok
    assert failed.ran == ["alpha", "beta"]
    assert set(record(project)["roles"]) == {"alpha", "gamma"}
    assert run(project, extravars={"value_for_alpha": "two"}).ran == ["beta"]


def test_reconverge_check_mode_and_plain_runs(project: dict[str, Any]) -> None:
    run(project)
    assert run(project, reconverge=True).ran == ["gamma", "alpha", "beta"]
    before = project["record"].read_text()
    checked = run(project, check=True, extravars={"value_for_alpha": "two"})
    assert checked.ran == ["alpha", "beta"]
    assert project["record"].read_text() == before  # check mode keeps the record as it was
    project["record"].unlink()
    plain = run(project, records=False)  # no flashfleet_converge: every role, no record
    assert plain.ran == ["gamma", "alpha", "beta"]
    assert not project["record"].exists()


def test_tags_limit_which_roles_check(project: dict[str, Any]) -> None:
    run(project)
    (project["files"] / "alpha").write_text("edited by hand\n")
    only_beta = run(project, tags="beta")
    assert only_beta.ran == []  # alpha's drift is alpha's, and alpha is not in this run
    assert run(project, tags="alpha").ran == ["alpha"]
