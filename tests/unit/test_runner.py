"""flashfleet.bringup.playbook_run: event handling on synthetic events, and one real ansible-runner run of
playbooks/prepare.yml against this machine (read-only preflight probes) that must fail with a
readable summary and leave no trace of the token; and real runs of small local playbooks that print
the token or an awkwardly shaped API key (at -vvv, in every form) and must keep none of it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from flashfleet.bringup.playbook_run import (
    Progress,
    _EventSink,
    failure_message,
    run_playbook,
    split_task_name,
)
from flashfleet.bringup.redaction import REDACTED

TOKEN = "hf_unitTESTtoken987654321"


def event(kind: str, task: str, res: dict[str, object], **data: object) -> dict[str, object]:
    return {"event": kind, "event_data": {"host": "n1", "role": "preflight", "task": task,
                                          "task_uuid": "u1", "res": res, **data}}  # fmt: skip


def test_task_names_split_into_phase_and_task() -> None:
    assert split_task_name("Install | add the CUDA repository") == ("install", "add the CUDA repository")
    assert split_task_name("Gathering Facts") == ("", "Gathering Facts")


def test_failure_message_prefers_msg_then_stderr() -> None:
    assert failure_message({"msg": "non-zero return code", "stderr": "E: boom"}) == (
        "non-zero return code | E: boom"
    )
    assert "no_log" in failure_message({"censored": "hidden: no_log"})


def test_failure_message_keeps_each_problem_a_long_build_log_would_bury() -> None:
    build = "\n".join(
        ["Step 1/9 : FROM base", *(f"layer {i}" for i in range(40)),
         "FAIL: torchcodec 0.9.1 installed, torchcodec==0.17.0 pinned", "more build output",
         "  FAIL: pip check: sglang 0.5.23 has requirement transformers==5.19.0", "versions: {}"]
    )  # fmt: skip
    message = failure_message({"msg": "non-zero return code", "stdout": build, "stderr": "x" * 401})
    assert message == (
        "non-zero return code | "
        + "x" * 401
        + " | FAIL: torchcodec 0.9.1 installed, torchcodec==0.17.0 pinned"
        " | FAIL: pip check: sglang 0.5.23 has requirement transformers==5.19.0 | versions: {}"
    )


def test_sink_reports_progress_failures_and_keeps_every_event(tmp_path: Path) -> None:
    seen: list[Progress] = []
    sink = _EventSink(tmp_path / "events.jsonl", seen.append)
    sink(event("runner_on_ok", "Disk | measure", {"changed": False}))
    sink(event("runner_on_ok", "Install | key", {"changed": True}))
    sink(event("runner_on_failed", "Gpus | match", {"msg": "GPU mismatch: 4 vs 8"}))
    sink(event("runner_on_failed", "Probe | tolerated", {"msg": "x"}, ignore_errors=True))
    sink(event("runner_on_async_ok", "Download | fetch", {"changed": True}))
    sink(event("runner_on_ok", "Download | fetch", {"censored": "hidden"}))
    sink({"event": "verbose", "stdout": "\x1b[0;31mERROR! the role 'x' was not found\x1b[0m"})
    sink.close()
    assert [p.status for p in seen] == ["ok", "changed", "failed", "failed", "changed"]
    assert seen[2] == Progress("n1", "preflight", "gpus", "match", "failed")
    assert [(f.task, f.message) for f in sink.failures] == [
        ("match", "GPU mismatch: 4 vs 8"),
        ("playbook", "ERROR! the role 'x' was not found"),
    ]
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 7


def test_a_real_failing_run_is_summarised_and_keeps_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where ansible-runner's env dump goes
    facts = {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
        "flashfleet_vendor": "nvidia", "flashfleet_arch": "x86_64", "flashfleet_gpu_model": "H200",
        "flashfleet_gpu_count": 8, "flashfleet_model_cache_dir": str(tmp_path / "hf"),
        "flashfleet_host_memory_gb": 0, "flashfleet_hicache_host_gb": 0, "flashfleet_mooncake": False,
    }  # fmt: skip
    inventory = {"all": {"children": {"flashfleet": {"hosts": {"controller": facts}}}}}
    seen: list[Progress] = []
    result = run_playbook(
        "prepare.yml", inventory, run_dir=tmp_path / "run", hf_token=TOKEN, tags="preflight",
        extravars={"preflight_weights_gb": 10**6}, on_progress=seen.append,
        records=False,  # this machine is the node: keep no converge record on it
    )  # fmt: skip
    assert not result.ok
    assert result.count("failures", "controller") == 1
    [failure] = result.failures
    assert failure.task == "enough free space for image and weights"
    assert "needs 1000060 GB (image 40 + weights 1000000 + margin 20)" in failure.message
    assert str(failure) in result.summary()
    assert (tmp_path / "run/summary.txt").read_text().startswith("playbook failed")
    assert any(p.phase == "disk" and p.status == "failed" for p in seen)
    events = [json.loads(line) for line in result.events_log.read_text().splitlines()]
    assert any(e["event"] == "playbook_on_stats" for e in events)
    # ansible-runner dumped its environment (with the token) in its private dir: removed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("flashfleet-runner-")] == []
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and TOKEN in p.read_text(errors="replace")]
    assert leaks == []


LEAKY_PLAYBOOK = """---
- name: A task that puts the token in its environment, the way the old download did
  hosts: all
  gather_facts: false
  tasks:
    - name: Leaky | async command with the token in its environment
      ansible.builtin.command:
        argv: [/bin/true]
      environment:
        HF_TOKEN: "{{ lookup('ansible.builtin.env', 'FLASHFLEET_HF_TOKEN') }}"
      async: 30
      poll: 1
      changed_when: false
      no_log: true
"""


@pytest.mark.parametrize("verbosity", ["0", "4"])
def test_events_never_hold_the_token_and_the_run_dir_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verbosity: str
) -> None:
    # Issue 14: at ANSIBLE_VERBOSITY>=3 Ansible prints an async task's environment (EXEC lines):
    # the runner's redaction is the second line of defence behind the roles keeping it out.
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "roles").mkdir()
    (project / "playbooks/leaky.yml").write_text(LEAKY_PLAYBOOK)
    monkeypatch.setenv("ANSIBLE_VERBOSITY", verbosity)
    inventory = {"all": {"hosts": {"controller": {"ansible_connection": "local",
                                                  "ansible_python_interpreter": "/usr/bin/python3"}}}}  # fmt: skip
    run_dir = tmp_path / "runs" / "stack" / "run"
    result = run_playbook("leaky.yml", inventory, run_dir=run_dir, hf_token=TOKEN, project_root=project)
    assert result.ok, result.summary()
    events = result.events_log.read_text()
    assert TOKEN not in events
    if verbosity == "4":
        assert "EXEC" in events  # the verbose lines are there ...
        assert REDACTED in events  # ... and the token they printed was replaced
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "runs").stat().st_mode & 0o777) == "0o700"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in run_dir.iterdir()} == {
        "events.jsonl": "0o600",
        "summary.txt": "0o600",
    }


# A key of every awkward shape: quotes, a backslash, a tab, non-ASCII; TAIL is its plain part,
# which every quoting (JSON, repr, URL) leaves as it is.
TAIL = "Q7v9mWc2LxR1pZ8k"
SHAPED_KEY = f'sk-"it\'s"\\ \t é中-{TAIL}'
PRINTING_PLAYBOOK = """---
- name: Tasks that print the API key in every form Ansible and the servers can give it
  hosts: all
  gather_facts: false
  vars:
    key: "{{ lookup('ansible.builtin.env', 'FLASHFLEET_API_KEY') }}"
  tasks:
    - name: Print | the key in each form
      ansible.builtin.debug:
        msg:
          - "{{ key }}"
          - "{{ key | to_json }}"
          - "{{ {'api_key': key} | to_json | to_json }}"
          - "server_args=ServerArgs(api_key={{ [key] | string }})"
          - "{{ key | urlencode }}"
          - "{{ key | b64encode }}"
          - "{{ ('a' ~ key ~ 'z') | b64encode }}"
          - "{{ ('ab' ~ key ~ 'z') | b64encode }}"
          - "{{ key[:7] }}\\n{{ key[7:17] }}\\n    {{ key[17:] }}"
    - name: Print | a server's log line with the key (a module's stdout)
      ansible.builtin.command:
        argv: [python3, -c, "import os; print(f'server_args={[os.environ[\\"FLASHFLEET_API_KEY\\"]]!r}')"]
      changed_when: false
    - name: Leak | a task that fails quoting the key
      ansible.builtin.fail:
        msg: "refused key {{ key }}"
"""


def test_a_real_verbose_run_hides_every_form_of_an_awkward_key_and_names_the_failing_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("ANSIBLE_VERBOSITY", "3")
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "roles").mkdir()
    (project / "playbooks/print.yml").write_text(PRINTING_PLAYBOOK)
    inventory = {"all": {"hosts": {"controller": {"ansible_connection": "local",
                                                  "ansible_python_interpreter": "/usr/bin/python3"}}}}  # fmt: skip
    run_dir = tmp_path / "runs" / "run"
    result = run_playbook("print.yml", inventory, run_dir=run_dir, api_key=SHAPED_KEY, project_root=project)

    [failure] = result.failures
    assert (failure.host, failure.task) == ("controller", "a task that fails quoting the key")
    assert failure.message == f"refused key {REDACTED}"
    summary = (run_dir / "summary.txt").read_text()
    assert "a task that fails quoting the key" in summary
    events = [json.loads(line) for line in result.events_log.read_text().splitlines()]
    assert [e["event"] for e in events if e["event"].startswith("runner_on_")] == [
        "runner_on_start", "runner_on_ok", "runner_on_start", "runner_on_ok", "runner_on_start",
        "runner_on_failed",
    ]  # fmt: skip
    [printed] = [e for e in events if e["event"] == "runner_on_ok" and "Print | the key" in str(e)]
    messages = printed["event_data"]["res"]["msg"]
    assert len(messages) == 9
    assert all(REDACTED in m for m in messages), messages  # printed, then hidden
    raw = SHAPED_KEY.encode()
    cores = {
        base64.b64encode(b"\0" * k + raw).decode()[4 if k else 0 : 4 * ((k + len(raw)) // 3)]
        for k in (0, 1, 2)
    }
    files = [p for p in tmp_path.rglob("*") if p.is_file() and project not in p.parents]
    assert {p.name for p in files} >= {"events.jsonl", "summary.txt"}
    for path in files:
        text = path.read_text(errors="replace")
        plain = "".join(text.split()).replace("\\n", "")  # a wrapped copy, joined again
        assert TAIL not in plain, path
        assert [c for c in cores if c in plain] == [], path
    assert REDACTED in result.events_log.read_text()
