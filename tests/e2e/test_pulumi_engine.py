"""`pulumi up --stack` through the real Pulumi engine on two booted test hosts (issue 12).

One stack, in order: a cold `pulumi up` (nodes, then prepare, Mooncake, serve and verify),
a second `up` that changes nothing, the state holding the HF token only as ciphertext,
`flashfleet status`, an option change through `flashfleet up` that updates the bring-up alone
and restarts the unit with the new argv, then `flashfleet down` with one host gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.harness import HostSpec
from roles.conftest import TOKEN, open_lab
from roles.hardware import H200, NVIDIA_DEVICES
from roles.test_preflight import SMALL_SIZES

from .conftest import TIMINGS
from .engine import FAKE_DOCKER, Engine, install_fake_docker, pulumi_cli

pytestmark = [
    pytest.mark.skipif(
        pulumi_cli() is None, reason="no Pulumi CLI: scripts/setup.d/40-pulumi.sh builds it into .tools/bin"
    ),
]
HOSTS = ["e2ea", "e2eb"]
NEW_NAME = "e2e-renamed-model"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    # the role tests' lab (hosts, signed vendor repository, wheels, Hub), with the serving
    # container replaced at the container boundary; the Pulumi project and state beside it
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-e2e-", dir="/var/tmp"))
    eng: Engine | None = None
    try:
        with open_lab([HostSpec(h, H200, NVIDIA_DEVICES) for h in HOSTS]) as lab:
            pool, base = lab.pool, lab.base_url
            for host in pool.hosts.values():
                install_fake_docker(host.root)
            role_vars = {
                "nvidia_driver_repo_url": f"{base}/cuda/repos",
                "container_runtime_docker_repo_url": f"{base}/docker/linux",
                "container_runtime_nvidia_repo_url": f"{base}/libnvidia-container",
                "model_weights_hf_endpoint": lab.hub_url,
                "model_weights_pip_find_links": f"{base}/wheels/",
                "model_weights_pip_trusted_host": pool.gateway,
                "sglang_serve_docker": FAKE_DOCKER,
                "sglang_serve_ready_timeout_s": 60,
                "sglang_serve_ready_poll_s": 1,
                **SMALL_SIZES,
            }
            eng = Engine(workdir, pool, role_vars)
            eng.write_project([pool.hosts[h].address for h in HOSTS], {})
            eng.run("pulumi", "stack", "init", eng.stack, "--non-interactive")
            eng.pulumi("config", "set", "--secret", "flashfleet:hfToken", TOKEN)
            yield eng
    finally:
        if eng is not None:
            TIMINGS.update(eng.timings)
        shutil.rmtree(workdir, ignore_errors=True)


def outputs(eng: Engine) -> dict[str, Any]:
    return json.loads(eng.pulumi("stack", "output", "--json").stdout)


def launches(eng: Engine) -> dict[str, list[dict[str, Any]]]:
    """Pool host -> the launches its inventory entry lists."""
    hosts = outputs(eng)["inventory"]["all"]["hosts"]
    by_address = {v["ansible_host"]: v for v in hosts.values()}
    return {h: list(by_address[eng.pool.hosts[h].address]["flashfleet_processes"]) for h in HOSTS}


def ssh(eng: Engine, host: str, command: str) -> str:
    return eng.pool.ssh(host, command, check=False).stdout


def fake_runs(eng: Engine, host: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in ssh(eng, host, "cat /var/lib/fake-docker/runs.jsonl").splitlines()]


def test_an_unpinned_host_is_refused_before_anything_runs(engine: Engine) -> None:
    # The same hosts without their keys, as another stack: the engine's program refuses it with
    # the field and rule, one line per problem and no traceback, and registers nothing.
    bad = "e2e-unpinned"
    doc = yaml.safe_load(engine.stack_file.read_text())
    for host in doc["config"]["flashfleet:stack"]["nodes"]["source"]["hosts"]:
        del host["hostKeys"]
    (engine.stack_file.parent / f"Pulumi.{bad}.yaml").write_text(yaml.safe_dump(doc))
    engine.run("pulumi", "stack", "init", bad, "--non-interactive")
    done = engine.run(
        "pulumi", "up", "--yes", "--skip-preview", "--stack", bad, "--non-interactive", check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "nodes.source.hosts[0].hostKeys" in out, out
    assert "[rule: host-key-unpinned]" in out, out
    assert "Traceback" not in out, out
    assert not [h for h in HOSTS if fake_runs(engine, h)], "a refused stack reached a host"
    exported = json.loads(engine.run("pulumi", "stack", "export", "--stack", bad).stdout)
    assert len(exported["deployment"].get("resources") or []) <= 1  # at most the Stack itself
    engine.run("pulumi", "stack", "rm", "--yes", "--force", "--stack", bad)


def test_pulumi_up_brings_the_stack_up(engine: Engine) -> None:
    engine.pulumi("up", "--yes", "--skip-preview", timed="pulumi up (cold: prepare, serve, verify)")
    for host, procs in launches(engine).items():
        assert procs, host
        for launch in procs:
            unit = f"{launch['container_name']}.service"
            assert ssh(engine, host, f"systemctl is-active {unit}").strip() == "active", (host, unit)
    endpoint = outputs(engine)["endpoint"]
    with urllib.request.urlopen(f"{endpoint}/models", timeout=10) as resp:
        assert resp.status == 200
        assert json.load(resp)["data"], "the stand-in server lists no model"


def test_ls_lists_the_stack_as_up_with_its_endpoint_and_expiry(engine: Engine) -> None:
    done = engine.flashfleet("ls", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {r["stack"]: r for r in json.loads(done.stdout)}
    row = rows[engine.stack]
    assert row["state"].startswith("up ("), row
    assert row["endpoint"] == outputs(engine)["endpoint"]
    assert row["expires_at"] == outputs(engine)["expiresAt"]
    assert row["live_since"], row  # the first update after no destroy
    assert row["cost_so_far_usd"] is None  # existing hosts: not billed through flashfleet
    text = engine.flashfleet("ls").stdout
    assert any(line.startswith(engine.stack) and "unknown" in line for line in text.splitlines()), text


def test_second_up_changes_nothing(engine: Engine) -> None:
    before = {h: len(fake_runs(engine, h)) for h in HOSTS}
    engine.pulumi("up", "--yes", "--expect-no-changes", timed="pulumi up (no change)")
    assert {h: len(fake_runs(engine, h)) for h in HOSTS} == before


def test_state_holds_the_token_only_as_ciphertext(engine: Engine) -> None:
    state = engine.export()
    assert TOKEN not in state
    assert '"ciphertext"' in state
    assert TOKEN not in engine.stack_file.read_text()


def test_flashfleet_status_masks_the_token(engine: Engine) -> None:
    done = engine.flashfleet("status", engine.stack, timed="flashfleet status")
    assert done.returncode == 0, done.stderr
    assert "last operation: update succeeded" in done.stdout
    assert "hfToken: [secret]" in done.stdout
    assert TOKEN not in done.stdout + done.stderr


def test_status_and_configure_refuse_an_unreadable_stack_in_one_line(engine: Engine) -> None:
    wrong = {"PULUMI_CONFIG_PASSPHRASE": "not-the-passphrase"}
    configure = engine.flashfleet("configure", engine.stack, env=wrong)
    assert configure.returncode == 2, (configure.stdout, configure.stderr)
    # status still lists the runs recorded here, and says in one line why Pulumi was not read
    status = engine.flashfleet("status", engine.stack, env=wrong)
    assert status.returncode == 0, (status.stdout, status.stderr)
    assert "pulumi: not read" in status.stderr
    for done in (configure, status):
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_option_change_updates_only_the_bringup(engine: Engine) -> None:
    addresses = [engine.pool.hosts[h].address for h in HOSTS]
    engine.write_stack(addresses, {"extra_args": ["--served-model-name", NEW_NAME]})
    steps = engine.preview_steps()
    assert steps.get("update") == ["bringup"], steps
    assert set(steps) <= {"same", "update"}, steps
    before = {h: len(fake_runs(engine, h)) for h in HOSTS}
    done = engine.flashfleet("up", engine.stack, "--yes", timed="flashfleet up (option change)")
    assert done.returncode == 0, done.stdout + done.stderr
    for host in HOSTS:
        runs = fake_runs(engine, host)
        assert len(runs) > before[host], host
        assert NEW_NAME in runs[-1]["argv"], runs[-1]
        for launch in launches(engine)[host]:
            unit = f"{launch['container_name']}.service"
            assert ssh(engine, host, f"systemctl is-active {unit}").strip() == "active", (host, unit)
            assert NEW_NAME in ssh(engine, host, f"systemctl cat {unit}")


def test_down_with_one_host_gone_warns_and_clears_the_other(engine: Engine) -> None:
    procs = launches(engine)
    gone = engine.pool.hosts[HOSTS[1]]
    os.killpg(gone.process.pid, signal.SIGTERM)
    gone.process.wait(timeout=60)
    done = engine.flashfleet("down", engine.stack, "--yes", timed="flashfleet down (one host gone)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unreachable" in done.stdout + done.stderr
    host = HOSTS[0]
    for launch in procs[host]:
        name = launch["container_name"]
        assert ssh(engine, host, f"test -e /etc/systemd/system/{name}.service && echo unit").strip() == ""
        assert ssh(engine, host, f"systemctl is-active {name}.service").strip() != "active"
        if launch.get("env_file"):
            assert ssh(engine, host, f"test -e {launch['env_file']} && echo file").strip() == ""
    # the bracket keeps the ssh shell's own command line (which names the pattern) from matching
    assert ssh(engine, host, "pgrep -f '[s]tandin_openai' || true").strip() == ""
    assert ssh(engine, host, f"{FAKE_DOCKER} ps -q").strip() == ""
    assert json.loads(engine.export())["deployment"].get("resources") in (None, [])
