"""model_weights on a real host against a stand-in Hub, with the real `hf download` client:
downloaded once into the shared cache, a failed run resumes without refetching complete
files, a dropped connection is survived, the gated draft needs the token; the background job
installs the client after the start play and removes the token file itself."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from typing import Any

import pytest
from hosts.hub import Repo, Request

from flashfleet.bringup.redaction import REDACTED
from flashfleet.cli.lock import resolve_repo

from .conftest import TOKEN, Lab, assert_no_change, assert_same_plan, host_state
from .hardware import DRAFT, MODEL, facts

SHARD = "model-00002-of-00002.safetensors"
CACHE = "/var/lib/flashfleet/hf/hub"
VENV = "/opt/flashfleet/hf-cli"
TOKEN_FILE = "/run/flashfleet/hf-token"
JOB_TASK = "Start | client and downloads, one background job"


def _token_file_gone(lab: Lab) -> bool:
    return lab.pool.ssh("h200", f"test -e {TOKEN_FILE} || echo gone").stdout.strip() == "gone"


def file_gets(lab: Lab, repo: str, name: str) -> list[Request]:
    return [r for r in lab.hub.file_gets(repo) if r.path.endswith(f"/{name}")]


def test_interrupted_download_resumes_without_refetching(lab: Lab) -> None:
    before = host_state(lab, "h200")
    check = lab.play(["h200"], "model_weights", check=True)
    assert check.ok, check.explain()
    assert host_state(lab, "h200") == before
    assert lab.hub.requests == []  # check mode does not download

    lab.hub.unavailable.add(f"{MODEL}/{SHARD}")
    # and the Hub quotes the token in the URL of its error, which the client prints
    lab.hub.quote_token_in_errors = True
    failed = lab.play(["h200"], "model_weights")
    lab.hub.quote_token_in_errors = False
    assert not failed.ok
    [failure] = failed.result.failures
    assert (failure.role, failure.task) == ("model_weights", "explain a failed download")
    # one line for the host, naming the repository and the client's reason, the token redacted
    assert failure.message.startswith(
        f"hf download {MODEL} failed (rc 1): Error: File not found in model '{MODEL}'. / URL: "
    ), failure.message
    assert failure.message.endswith(f"/{SHARD}?credential=hf_***"), failure.message
    assert "\n" not in failure.message.strip()
    assert TOKEN not in failed.result.events_log.read_text()
    assert REDACTED not in failed.result.events_log.read_text()  # never reached Ansible at all
    assert len(file_gets(lab, MODEL, "model-00001-of-00002.safetensors")) == 1
    # the failed background download left no token file behind
    assert _token_file_gone(lab)

    lab.hub.unavailable.clear()
    lab.hub.interrupt_once.add(f"{MODEL}/{SHARD}")  # and the connection drops mid-file
    run = lab.play(["h200"], "model_weights")
    assert run.ok, run.explain()
    assert_same_plan(check, failed, "h200", run)
    # the shard that completed in the failed run was not fetched again
    assert len(file_gets(lab, MODEL, "model-00001-of-00002.safetensors")) == 1
    snapshot = lab.pool.ssh(
        "h200", f"cat /var/lib/flashfleet/hf/.flashfleet-complete/{MODEL.replace('/', '--')}@main"
    )
    path = f"{snapshot.stdout.strip()}/{SHARD}"
    on_disk = lab.pool.ssh("h200", f"sha256sum {path}").stdout.split()[0]
    assert on_disk == hashlib.sha256(bytes([2]) * 1_500_000).hexdigest()  # intact after the drop
    # one cache for every process of the node: world-readable, in the standard hub layout
    mode = lab.pool.ssh("h200", f"stat -c %a {CACHE} {CACHE}/models--zai-org--GLM-5.3-Flash").stdout.split()
    assert mode == ["755", "755"]

    requests = len(lab.hub.requests)
    assert_no_change(lab.play(["h200"], "model_weights"))
    assert len(lab.hub.requests) == requests  # downloaded once: a rerun does not even ask


def test_gated_draft_needs_the_token(lab: Lab) -> None:
    with_draft = {"h200": {"flashfleet_draft_model": DRAFT}}
    refused = lab.play(["h200"], "model_weights", facts_override=with_draft, token=None)
    assert not refused.ok
    assert "set FLASHFLEET_HF_TOKEN" in refused.result.failures[0].message

    run = lab.play(["h200"], "model_weights", facts_override=with_draft)
    assert run.ok, run.explain()
    [get] = lab.hub.file_gets(DRAFT)
    assert get.authorization == f"Bearer {TOKEN}"
    listing = lab.pool.ssh("h200", f"ls {CACHE}/models--zai-org--GLM-5.3-Flash-DFlash2/snapshots/*/")
    assert listing.stdout.split() == ["config.json"]


def test_token_is_in_no_log_event_or_host_file(lab: Lab) -> None:
    # every run of the session so far, including the draft download that used the token
    leaked = [p for p in lab.runs.rglob("*") if p.is_file() and TOKEN in p.read_text(errors="replace")]
    assert leaked == []
    events = list(lab.runs.rglob("events.jsonl"))
    assert events  # the event logs exist and were searched
    on_host = lab.pool.ssh(
        "h200",
        f"journalctl --no-pager | grep -c {TOKEN}; grep -rl {TOKEN} /var/log /root /tmp /etc /opt /var/lib/flashfleet",
        check=False,
    )
    assert on_host.stdout.split() == ["0"]


@pytest.mark.parametrize("verbosity", ["0", "4"])
def test_token_stays_out_of_events_at_any_verbosity(
    lab: Lab, verbosity: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 14: at ANSIBLE_VERBOSITY>=3 Ansible printed the async download's environment, and
    # with it HF_TOKEN, into events.jsonl (0644). A fresh cache makes the gated draft download
    # again, with the token.
    monkeypatch.setenv("ANSIBLE_VERBOSITY", verbosity)
    fresh = {
        "h200": {
            "flashfleet_draft_model": DRAFT,
            "flashfleet_model_cache_dir": f"/var/lib/flashfleet/hf-v{verbosity}",
        }
    }
    before = len(lab.hub.file_gets(DRAFT))
    run = lab.play(["h200"], "model_weights", facts_override=fresh)
    assert run.ok, run.explain()
    assert len(lab.hub.file_gets(DRAFT)) > before  # it did download, with the token
    assert lab.hub.file_gets(DRAFT)[-1].authorization == f"Bearer {TOKEN}"
    run_dir = run.result.run_dir
    events = run.result.events_log.read_text()
    if verbosity == "4":
        assert "EXEC" in events  # the verbose connection lines are there
    assert TOKEN not in events
    # never there in the first place: the redaction in the runner is only a second line
    assert REDACTED not in events
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in run_dir.iterdir()} == {"0o600"}
    assert _token_file_gone(lab)


def _job_started(run: Any) -> tuple[str, float]:
    """The background job's id and when its start task returned (the start play's last task)."""
    for line in run.result.events_log.read_text().splitlines():
        event = json.loads(line)
        data = event.get("event_data") or {}
        if event["event"] == "runner_on_ok" and data.get("task") == JOB_TASK:
            return data["res"]["ansible_job_id"], datetime.fromisoformat(data["end"]).timestamp()
    raise AssertionError("no background job was started")


def _job_result(lab: Lab, jid: str, timeout_s: float = 120) -> dict[str, Any]:
    """The job's result, as async_wrapper writes it for async_status (polled, as the wait does)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = lab.pool.ssh("h200", f"cat /root/.ansible_async/{jid}").stdout
        result = json.loads(text)
        if not result.get("started"):  # the module's own result replaced the "started" note
            return dict(result)
        time.sleep(1)
    raise AssertionError(f"job {jid} still running after {timeout_s} s")


def test_the_job_installs_the_client_and_removes_the_token_without_the_wait(lab: Lab) -> None:
    # Issue 17: the client's venv and pip install ran in the start play, so the driver play started
    # that much later; and a node that failed in a later play never reached the wait, so its token
    # file stayed in /run until the next prepare. Here the node fails in the driver play (a driver
    # branch the repository does not have), with no client on it and an empty cache.
    lab.pool.ssh("h200", f"rm -rf {VENV}")
    cache = "/var/lib/flashfleet/hf-later"
    driver = {**facts("h200")["flashfleet_driver"], "branch": "999", "version": "999.0.0-1"}
    broken = {"h200": {"flashfleet_model_cache_dir": cache, "flashfleet_driver": driver}}
    run = lab.play(["h200"], "model_weights,nvidia_driver", facts_override=broken)
    assert not run.ok
    [failure] = run.result.failures
    assert failure.role == "nvidia_driver", failure
    phases = {(p.role, p.phase) for p in run.progress if p.host == "h200"}
    assert ("model_weights", "start") in phases
    assert ("model_weights", "wait") not in phases  # the wait never ran on this node
    jid, start_returned = _job_started(run)

    result = _job_result(lab, jid)
    assert result["rc"] == 0, result
    report = json.loads(result["stdout"])
    assert report == {
        "changed": True,
        "installed": "huggingface_hub 2.4.0",
        "downloaded": [MODEL],
        "failed": [],
    }
    # the client was installed by the job, after the start play had returned
    installed = lab.pool.ssh("h200", f"python3 -c 'import os; print(os.stat(\"{VENV}/bin/hf\").st_mtime)'")
    assert float(installed.stdout) > start_returned
    # the job removed the token file when it ended, and marked the download complete itself
    assert _token_file_gone(lab)
    marker = lab.pool.ssh("h200", f"cat {cache}/.flashfleet-complete/{MODEL.replace('/', '--')}@main")
    assert marker.stdout.startswith(f"{cache}/hub/models--zai-org--GLM-5.3-Flash/snapshots/")
    lab.pool.ssh("h200", f"rm -f /root/.ansible_async/{jid}")  # what the wait would have cleaned

    # the next prepare finds the download complete: changed=0, not a request to the Hub
    requests = len(lab.hub.requests)
    assert_no_change(
        lab.play(["h200"], "model_weights", facts_override={"h200": {"flashfleet_model_cache_dir": cache}})
    )
    assert len(lab.hub.requests) == requests


def test_a_lock_pins_the_commit_and_checks_every_file_on_the_node(lab: Lab) -> None:
    # `flashfleet lock` resolves main against the Hub; then main moves on
    repo = "lock-test/GLM-5.3-Flash"
    name = "model-00001-of-00001.safetensors"
    lab.hub.repos[repo] = Repo({"config.json": b'{"v": 1}', name: bytes([7]) * 400_000})
    locked = resolve_repo(repo, "main", lab.hub_url)
    moved = lab.hub.repos[repo].move_main({"config.json": b'{"v": 2}', name: bytes([9]) * 400_000})
    assert moved != locked.commit

    def node(cache: str) -> dict[str, dict[str, Any]]:
        lock = {repo: locked.model_dump(mode="json")}
        return {
            "h200": {
                "flashfleet_model": repo,
                "flashfleet_model_cache_dir": cache,
                "flashfleet_weights_lock": lock,
            }
        }

    # the next bring-up still downloads the locked commit, not what main names now
    run = lab.play(["h200"], "model_weights", facts_override=node("/var/lib/flashfleet/hf-locked"))
    assert run.ok, run.explain()
    gets = lab.hub.file_gets(repo)
    assert gets
    assert all(f"/resolve/{locked.commit}/" in g.path for g in gets), [g.path for g in gets]
    snapshot = f"/var/lib/flashfleet/hf-locked/hub/models--lock-test--GLM-5.3-Flash/snapshots/{locked.commit}"
    on_disk = lab.pool.ssh("h200", f"sha256sum {snapshot}/{name}").stdout.split()[0]
    assert on_disk == hashlib.sha256(bytes([7]) * 400_000).hexdigest()
    marker = f"/var/lib/flashfleet/hf-locked/.flashfleet-complete/lock-test--GLM-5.3-Flash@{locked.commit}"
    assert lab.pool.ssh("h200", f"cat {marker}").stdout.strip() == snapshot

    # a Hub (or mirror) that serves other bytes than it listed: the host fails, naming the file,
    # and the bytes leave the cache
    lab.hub.tampered[f"{repo}/{name}"] = bytes([8]) * 400_000
    tampered = lab.play(["h200"], "model_weights", facts_override=node("/var/lib/flashfleet/hf-tampered"))
    assert not tampered.ok
    [failure] = tampered.result.failures
    want = hashlib.sha256(bytes([7]) * 400_000).hexdigest()
    got = hashlib.sha256(bytes([8]) * 400_000).hexdigest()
    assert failure.message == (
        f"hf download {repo} failed (not the locked bytes: {name} has sha256 {got} where the lock has {want})"
    ), failure.message
    left = lab.pool.ssh(
        "h200", "find /var/lib/flashfleet/hf-tampered -name '*.safetensors' -o -type f -size +300k"
    )
    assert left.stdout.strip() == ""
    assert _token_file_gone(lab)

    # once the Hub serves the right bytes, the next run fetches the shard again and passes
    del lab.hub.tampered[f"{repo}/{name}"]
    again = lab.play(["h200"], "model_weights", facts_override=node("/var/lib/flashfleet/hf-tampered"))
    assert again.ok, again.explain()


def test_a_node_that_loads_from_a_peer_downloads_no_weight_file(lab: Lab) -> None:
    """peer_load: the node's server loads the weights from another replica, so the node downloads
    the rest (config, tokenizer) at the locked commit, checked against the lock, and asks the Hub
    for no shard; a second run asks it nothing."""
    repo = "peer-test/GLM-5.3-Flash"
    shards = {f"model-0000{i}-of-00002.safetensors": bytes([i]) * 300_000 for i in (1, 2)}
    lab.hub.repos[repo] = Repo({"config.json": b'{"v": 1}', "tokenizer.json": b"{}", **shards})
    locked = resolve_repo(repo, "main", lab.hub_url)
    cache = "/var/lib/flashfleet/hf-peer"
    node = {
        "h200": {
            "flashfleet_model": repo,
            "flashfleet_model_cache_dir": cache,
            "flashfleet_weights_lock": {repo: locked.model_dump(mode="json")},
            "flashfleet_weights_exclude": ["*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf"],
        }
    }
    run = lab.play(["h200"], "model_weights", facts_override=node)
    assert run.ok, run.explain()
    fetched = sorted(g.path.rsplit("/", 1)[1] for g in lab.hub.file_gets(repo))
    assert fetched == ["config.json", "tokenizer.json"], fetched
    snapshot = f"{cache}/hub/models--peer-test--GLM-5.3-Flash/snapshots/{locked.commit}"
    assert lab.pool.ssh("h200", f"ls {snapshot}").stdout.split() == ["config.json", "tokenizer.json"]
    marker = f"{cache}/.flashfleet-complete/peer-test--GLM-5.3-Flash@{locked.commit}+no-weight-files"
    assert lab.pool.ssh("h200", f"cat {marker}").stdout.strip() == snapshot
    asked = len(lab.hub.requests)
    assert_no_change(lab.play(["h200"], "model_weights", facts_override=node))
    assert len(lab.hub.requests) == asked
