"""The serving API key (issue 14) on a real booted systemd test host, through the real
sglang_serve and verify roles, ansible-runner at ANSIBLE_VERBOSITY=3 and teardown.yml.

The server is the OpenAI stand-in in a container on the host's real Docker engine
(tests/serve/lab.py): it reads the `--config` file through the container's -v mount and, like
SGLang 0.5.23, answers 401
on /v1/* without `Authorization: Bearer <key>`. So a readiness probe or smoke check that did not
send the key, a unit that was not restarted on a new key, or a file the container was not given
fails here. The key is looked for everywhere else it could leak: the unit, systemd's ExecStart,
every process's argv and environment on the host, the journal, every file on the host's disk,
the inventory, and every file ansible-runner and flashfleet wrote for the runs (raw, before
flashfleet's redaction of events)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.redaction import REDACTED
from flashfleet.launch import API_KEY_CONFIG

from .lab import ServeLab, make_stack, serve_lab

HOST = "apikey"
# A distinctive prefix (searched for: it survives any escaping) then what YAML, JSON, systemd and
# a shell would each read differently if the role quoted the key wrongly.
PREFIX = "sk-ffhost-Vb7Qm2Xr9T"
KEY = PREFIX + " \"q\" 'a' #: yes $HOME %h"
NEW_PREFIX = "sk-ffhost-Nw4Jp8Ld1Z"
NEW_KEY = NEW_PREFIX + "-rotated"
TAGS = "serve,verify"
FAST = {"sglang_serve_ready_timeout_s": 60, "sglang_serve_ready_poll_s": 1}
UNIT = "flashfleet-server.service"
# every process's argv and environment on the host, one per line
PROCESSES = "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; tr '\\0' ' ' <$p/environ; echo; done 2>/dev/null"


@pytest.fixture(scope="module")
def keyed() -> Iterator[dict[str, Any]]:
    raw: list[dict[str, str]] = []  # per run: every file ansible-runner wrote, unredacted
    real_run = ansible_runner.run

    def capturing_run(**kwargs: Any) -> Any:
        runner = real_run(**kwargs)
        private = Path(kwargs["private_data_dir"])
        raw.append({
            str(p.relative_to(private)): p.read_text(errors="replace")
            for p in private.rglob("*")
            # artifacts/<ident>/command is the environment ansible-runner gave ansible-playbook,
            # which carries the key by design; playbook_run deletes the directory after the run
            if p.is_file() and p.name != "command"
        })  # fmt: skip
        return runner

    with pytest.MonkeyPatch.context() as mp, serve_lab([HOST]) as lab:
        mp.setenv("ANSIBLE_VERBOSITY", "3")
        mp.delenv("FLASHFLEET_API_KEY", raising=False)
        mp.setattr(ansible_runner, "run", capturing_run)  # what playbook_run imports when it runs
        lab.set_knobs(HOST, {"load_seconds": 2})
        stack = make_stack("ak", "unified", [lab.address(HOST)], serving={"apiKey": "required"})
        inventory = lab.inventory((stack, [HOST]))
        first = lab.run("site.yml", inventory, tags=TAGS, extravars=FAST, api_key=KEY)
        yield {"lab": lab, "inventory": inventory, "runs": [first], "raw": raw,
               "first_explain": lab.explain(first)}  # fmt: skip


def api(lab: ServeLab, path: str, key: str | None = None, scheme: str = "Bearer") -> int:
    """The HTTP status the node's server gives the controller (over the test bridge)."""
    headers = {"Authorization": f"{scheme} {key}"} if key is not None else {}
    req = urllib.request.Request(f"http://{lab.address(HOST)}:30000{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def server(lab: ServeLab) -> dict[str, str]:
    shown = lab.ssh(HOST, f"systemctl show -p MainPID -p ExecMainStartTimestampMonotonic {UNIT}")
    return dict(line.split("=", 1) for line in shown.split())


def passed(run: RunResult) -> set[str]:
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    return {e["event_data"]["task"] for e in events if e.get("event") == "runner_on_ok"}


def test_the_key_file_is_root_only_and_holds_the_key(keyed: dict[str, Any]) -> None:
    assert keyed["runs"][0].ok, keyed["first_explain"]
    lab = keyed["lab"]
    assert lab.ssh(HOST, f"stat -c '%a %U %G' {API_KEY_CONFIG}").split() == ["600", "root", "root"]
    assert yaml.safe_load(lab.ssh(HOST, f"cat {API_KEY_CONFIG}")) == {"api-key": KEY}
    # and the unprivileged login user cannot read it
    denied = lab.ssh(HOST, f"runuser -u ubuntu -- cat {API_KEY_CONFIG}", check=False)
    assert PREFIX not in denied


def test_the_probe_and_the_smoke_checks_passed_because_they_sent_the_key(keyed: dict[str, Any]) -> None:
    lab = keyed["lab"]
    # the server refuses the API to anyone without the key, as SGLang does; /health stays open
    assert api(lab, "/health") == 200
    assert api(lab, "/v1/models") == 401
    assert api(lab, "/v1/models", NEW_KEY) == 401
    assert api(lab, "/v1/models", KEY, scheme="Basic") == 401
    assert api(lab, "/v1/models", KEY) == 200
    # so the role's readiness probe got its 200 with the key, and verify's checks answered too
    ok = passed(keyed["runs"][0])
    assert "Ready | /v1/models lists the model: server" in ok
    assert "Ready | the API answered with the model, to the key it was given: server" in ok
    assert "Model | remember its id" in ok
    assert "Chat | reasoning_content and content both came back" in ok


def test_a_second_run_with_the_same_key_changes_nothing(keyed: dict[str, Any]) -> None:
    lab = keyed["lab"]
    before = server(lab)
    again = lab.run("site.yml", keyed["inventory"], tags=TAGS, extravars=FAST, api_key=KEY)
    keyed["runs"].append(again)
    assert again.ok, lab.explain(again)
    assert again.count("changed") == 0, [str(p) for p in lab.progress if p.status == "changed"]
    assert server(lab) == before


def test_a_new_key_restarts_the_server_and_the_old_one_is_refused(keyed: dict[str, Any]) -> None:
    lab = keyed["lab"]
    before = server(lab)
    rotated = lab.run("site.yml", keyed["inventory"], tags=TAGS, extravars=FAST, api_key=NEW_KEY)
    keyed["runs"].append(rotated)
    assert rotated.ok, lab.explain(rotated)
    after = server(lab)
    assert after["MainPID"] != before["MainPID"]
    assert int(after["ExecMainStartTimestampMonotonic"]) > int(before["ExecMainStartTimestampMonotonic"])
    # the restart is the key file's doing: nothing else of the node's changed (a no_log task's
    # event hides its `changed`, so the stats are what count the rewritten file)
    changed = {p.task for p in lab.progress if p.status == "changed"}
    assert changed == {"enabled and running, restarted when its unit or secrets changed: server"}
    assert rotated.count("changed") == 2
    assert yaml.safe_load(lab.ssh(HOST, f"cat {API_KEY_CONFIG}")) == {"api-key": NEW_KEY}
    assert api(lab, "/v1/models", KEY) == 401
    assert api(lab, "/v1/models", NEW_KEY) == 200


def leaks(text: str) -> list[str]:
    return [p for p in (PREFIX, NEW_PREFIX) if p in text]


def disk_holders(lab: ServeLab) -> set[str]:
    """Every file on the host's disk (its rootfs, seen from the controller) that holds a key."""
    root = lab.pool.hosts[HOST].root
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and leaks(path.read_bytes().decode(errors="replace"))
    }


def test_the_key_is_nowhere_but_its_file(keyed: dict[str, Any]) -> None:
    lab = keyed["lab"]
    # on the host: the unit, what systemd runs, every process's argv and environment, the journal
    assert not leaks(lab.ssh(HOST, "cat /etc/systemd/system/flashfleet-*.service"))
    exec_start = lab.ssh(HOST, f"systemctl show -p ExecStart {UNIT}")
    assert f"--config {API_KEY_CONFIG}" in exec_start
    assert not leaks(exec_start)
    procs = lab.ssh(HOST, PROCESSES)
    assert "standin_sglang.py" in procs
    assert f"--config {API_KEY_CONFIG}" in procs
    assert not leaks(procs)
    assert not leaks(lab.ssh(HOST, "journalctl --no-pager -o cat", check=False))
    # on its disk: only the key file (Docker's container records, Ansible's temporary files: none)
    assert disk_holders(lab) == {API_KEY_CONFIG.lstrip("/")}
    # on the controller: the inventory, the run directories, and what ansible-runner wrote before
    # flashfleet redacted anything (stdout, job events, inventory, extravars)
    assert not leaks(json.dumps(keyed["inventory"]))
    assert len(keyed["raw"]) == len(keyed["runs"]) == 3
    for run, raw in zip(keyed["runs"], keyed["raw"], strict=True):
        for path in run.run_dir.iterdir():
            text = path.read_text()
            assert not leaks(text), path
            assert REDACTED not in text, f"{path}: Ansible printed a key; only the redaction hid it"
        assert any(name.endswith("/stdout") for name in raw)
        assert any("/job_events/" in name for name in raw)
        for name, text in raw.items():
            assert not leaks(text), name
    # the runs really were at -vvv (SSH connection details are printed from -vvv up)
    stdout = next(text for name, text in keyed["raw"][0].items() if name.endswith("/stdout"))
    assert "ESTABLISH SSH CONNECTION" in stdout


def test_teardown_removes_the_key_file(keyed: dict[str, Any]) -> None:
    lab = keyed["lab"]
    down = lab.run("teardown.yml", keyed["inventory"])
    assert down.ok, lab.explain(down)
    assert lab.ssh(HOST, f"test -e {API_KEY_CONFIG} || echo gone").strip() == "gone"
    assert lab.ssh(HOST, f"systemctl is-active {UNIT}", check=False).strip() != "active"
    assert "standin_sglang" not in lab.ssh(HOST, "ps -eo args ww")
    assert disk_holders(lab) == set()
    for text in keyed["raw"][-1].values():
        assert not leaks(text)
