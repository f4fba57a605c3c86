"""`pulumi up --stack` through the real Pulumi engine on two booted test hosts (issue 12).

One stack, in order: a cold `pulumi up` (nodes, then prepare, Mooncake, serve and verify),
a second `up` that changes nothing, a benchmark (the real bench_serving of the parser oracle's
sglang, against the stack's endpoint) whose passed gate gives the stack its own badge in
`flashfleet status` and in the `evidence` output, the state holding the HF token only as
ciphertext, `flashfleet status`, an option change through `flashfleet up` that updates the
bring-up alone, restarts the unit with the new argv and makes the evidence stale, then
`flashfleet down` with one host gone. The serving containers run on the hosts' real Docker
engine (tests/e2e/engine.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.aptrepo import ENGINE_DEBS, real_engine_version
from hosts.engine_images import import_image, stop_engines
from hosts.harness import HostSpec
from hosts.registry import Registry
from roles.conftest import TOKEN, Lab, open_lab
from roles.hardware import H200, IMAGES, NVIDIA_DEVICES

from tests.bench.conftest import ORACLE, ORACLE_SITE

from .conftest import TIMINGS
from .engine import Engine, install_sandbox_docker, lab_site, pulumi_cli

pytestmark = [
    pytest.mark.skipif(
        pulumi_cli() is None, reason="no Pulumi CLI: scripts/setup.d/40-pulumi.sh builds it into .tools/bin"
    ),
]
HOSTS = ["e2ea", "e2eb"]
NEW_NAME = "e2e-renamed-model"


def existing_docker_hosts(lab: Lab, version: str, registry: Registry) -> str:
    """The hosts as many existing GPU hosts are: Docker installed (by the container_runtime role,
    which `up` then finds converged) and trusting the private registry the stack's image comes
    from. The base image is imported on the first host (no public registry is reachable) and
    pushed from there; the other host has never held it. Returns the image's repository; the
    timings go to the e2e summary."""
    start = time.monotonic()
    installed = lab.play(HOSTS, "container_runtime", extravars={"container_runtime_docker_version": version})
    assert installed.ok, installed.explain()
    key = (lab.repo.root / "repo-key.asc").read_text()
    for host in HOSTS:
        install_sandbox_docker(lab.pool.hosts[host].root)
        certs = lab.pool.hosts[host].root / f"etc/docker/certs.d/{registry.address}"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(registry.ca, certs / "ca.crt")
    repository = f"{registry.address}/{IMAGES['h200'].split(':')[0]}"
    pushed = f"{repository}:{IMAGES['h200'].split(':')[1]}"
    import_image(lab.pool, HOSTS[0], IMAGES["h200"], apt_repo=f"{lab.base_url}/debian", apt_key=key)
    lab.pool.ssh(
        HOSTS[0], f"docker tag {IMAGES['h200']} {pushed} && docker push {pushed} && docker rmi {pushed}"
    )
    TIMINGS["set-up: real Docker engine on 2 hosts, the base image in the registry"] = (
        time.monotonic() - start
    )
    return repository


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    # the role tests' lab (hosts, signed vendor repository, wheels, Hub) with the real Docker
    # engine in its repository; the Pulumi project and state beside it
    if not (ENGINE_DEBS / ".ok").exists():
        raise RuntimeError(f"{ENGINE_DEBS} missing: run scripts/setup.d/25-docker-engine.sh")
    workdir = Path(tempfile.mkdtemp(prefix="flashfleet-e2e-", dir="/var/tmp"))
    eng: Engine | None = None
    registry: Registry | None = None
    specs = [HostSpec(h, H200, NVIDIA_DEVICES, container_engine=True) for h in HOSTS]
    try:
        with open_lab(specs, groups=dict.fromkeys(HOSTS, "h200"), engine_debs=ENGINE_DEBS) as lab:
            pool = lab.pool
            version = real_engine_version().split("-")[0]
            try:
                registry = Registry(workdir / "registry", host=pool.gateway, tls=True).start()
                repository = existing_docker_hosts(lab, version, registry)
                eng = Engine(workdir, pool, lab_site(lab, version), repository)
                eng.write_project([pool.hosts[h].address for h in HOSTS], {})
                # the lock a `lock: required` stack needs: the Hub's commit, the registry's digest
                locked = eng.flashfleet(
                    "lock", eng.stack, timed="flashfleet lock",
                    env={"HF_ENDPOINT": lab.hub_url, "SSL_CERT_FILE": str(registry.ca)},
                )  # fmt: skip
                assert locked.returncode == 0, locked.stdout + locked.stderr
                eng.run("pulumi", "stack", "init", eng.stack, "--non-interactive")
                eng.pulumi("config", "set", "--secret", "flashfleet:hfToken", TOKEN)
                yield eng
            finally:
                stop_engines(pool, HOSTS)
                if registry is not None:
                    registry.stop()
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


def containers(eng: Engine, host: str) -> dict[str, dict[str, Any]]:
    """Name -> `docker inspect` of every container on the host's engine, running or not."""
    out = ssh(eng, host, "docker ps -aq --no-trunc | xargs -r docker inspect --format '{{json .}}'")
    return {doc["Name"].lstrip("/"): doc for doc in map(json.loads, out.splitlines())}


def started(eng: Engine) -> dict[str, dict[str, tuple[str, str]]]:
    """Host -> container name -> (id, start time): what a restart or a re-creation changes."""
    return {h: {n: (c["Id"], c["State"]["StartedAt"]) for n, c in containers(eng, h).items()} for h in HOSTS}


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
    assert not [h for h in HOSTS if containers(engine, h)], "a refused stack started a container"
    exported = json.loads(engine.run("pulumi", "stack", "export", "--stack", bad).stdout)
    assert len(exported["deployment"].get("resources") or []) <= 1  # at most the Stack itself
    engine.run("pulumi", "stack", "rm", "--yes", "--force", "--stack", bad)


def test_pulumi_up_brings_the_stack_up(engine: Engine) -> None:
    lock = yaml.safe_load((engine.stack_file.parent / f"{engine.stack}.lock.yaml").read_text())
    [locked] = [entry["digest"] for entry in lock["images"].values()]
    engine.pulumi("up", "--yes", "--skip-preview", timed="pulumi up (cold: prepare, serve, verify)")
    # the lock pins the one package these nodes pip-install (the weights client; the stack runs
    # the base image as it is), from the folder they install it from. The weights fan out from the
    # first node (locked, two GPU nodes): it downloads with exactly that client; its peer got every
    # file from it, checked against the lock, and needed no client at all
    client = lock["packages"]["huggingface_hub"]
    seed, *peers = HOSTS
    held = json.loads(ssh(engine, seed, "cat /opt/flashfleet/hf-cli/flashfleet-client.json"))
    assert held == {"sha256": sorted(f["sha256"] for f in client["files"].values())}, seed
    for host in peers:
        assert (
            ssh(engine, host, "test -e /opt/flashfleet/hf-cli/flashfleet-client.json || echo none")
            == "none\n"
        ), host
    # the vendors' apt packages: locked in the directories these Debian 12 hosts' sources name (the
    # repositories serve no Ubuntu), and asked of apt at the locked versions once each node had
    # checked its index and apt's plan against them (nvidia_driver, container_runtime)
    by_tail = {tail: index for index in lock["apt"] for tail in (
        "/cuda/repos/debian12/x86_64/", "/docker/linux/debian/dists/bookworm/stable/binary-amd64/",
        "/libnvidia-container/stable/deb/amd64/") if index.endswith(tail)}  # fmt: skip
    assert sorted(by_tail.values()) == sorted(lock["apt"]), lock["apt"]
    driver, docker, toolkit = (lock["apt"][index] for index in by_tail.values())
    assert {name: deb["version"] for name, deb in driver.items()} == {
        "nvidia-driver-595-open": "595.91.07-1", "nvidia-fabricmanager-595": "595.91.07-1",
    }  # fmt: skip
    assert toolkit["nvidia-container-toolkit"]["version"] == "1.20.1-1"
    for host in HOSTS:
        history = ssh(engine, host, "cat /var/log/apt/history.log")
        for name, deb in [*driver.items(), ("nvidia-container-toolkit", toolkit["nvidia-container-toolkit"])]:
            assert f"{name}={deb['version']}" in history, (host, name, history)
        for name in ("docker-ce", "containerd.io"):
            held = ssh(engine, host, f"dpkg-query -W -f '${{Version}}' {name}")
            assert held == docker[name]["version"], (host, name, held)
    for host, procs in launches(engine).items():
        assert procs, host
        # `docker ps` on the host lists each unit's container, from the image its launch names:
        # the base by the digest the lock pins, pulled from the registry (the second host never
        # held it before `up`), by its id
        listed = ssh(engine, host, "docker ps --format '{{.Names}} {{.Image}}'").splitlines()
        running = containers(engine, host)
        for launch in procs:
            name, image = launch["container_name"], launch["image"]
            unit = f"{name}.service"
            assert ssh(engine, host, f"systemctl is-active {unit}").strip() == "active", (host, unit)
            # (docker ps names a by-digest image by its repository:tag; its id is the digest's)
            assert f"{name} {image.split('@')[0]}" in listed, (host, listed)
            container = running[name]
            assert container["State"]["Running"], container["State"]
            image_id = ssh(engine, host, f"docker image inspect --format '{{{{.Id}}}}' {image}").strip()
            assert container["Image"] == image_id, (container["Image"], image_id)
            assert container["Args"] == launch["argv"][1:], container["Args"]  # after `sglang`
            assert image == f"{engine.repository}:v0.5.23@{locked}", image
            digests = ssh(engine, host, f"docker image inspect --format '{{{{json .RepoDigests}}}}' {image}")
            assert f"{engine.repository}@{locked}" in json.loads(digests), digests
    endpoint = outputs(engine)["endpoint"]
    # no benchmark has run: the stack has no badge of its own (flashfleet.bench.evidence)
    assert outputs(engine)["evidence"] == "no evidence"
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
    before = started(engine)
    engine.pulumi("up", "--yes", "--expect-no-changes", timed="pulumi up (no change)")
    assert started(engine) == before


# The packaged chat-1k1k profile's shape with a few short requests: seconds, not an hour.
SMALL_CHAT = """
[profiles.chat-1k1k]
description = "chat, short: the e2e's benchmark"
backend = "sglang"
dataset = "random-ids"
concurrency = [1]
prompts_per_concurrency = 4
min_prompts = 4
timeout_s = 300

[profiles.chat-1k1k.args]
random-input-len = 16
random-output-len = 16
random-range-ratio = 1.0
warmup-requests = 1
ready-check-timeout-sec = 30
"""


def test_a_passing_benchmark_earns_the_stack_its_own_badge(engine: Engine) -> None:
    # the real sglang 0.5.23 bench_serving (the oracle venv), offline (tests/bench/oracle_site)
    python = engine.workdir / "bench-python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={ORACLE_SITE} exec {ORACLE} "$@"\n')
    python.chmod(0o755)
    profiles = engine.workdir / "profiles.toml"
    profiles.write_text(SMALL_CHAT)
    done = engine.flashfleet(
        "bench", engine.stack, "--local", "--python", str(python), "--profiles-file", str(profiles),
        "--profile", "chat-1k1k", "--results", "results", timed="flashfleet bench (4 requests)",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = [p for p in (engine.project / "results" / engine.stack).iterdir() if p.is_dir()]
    evidence = json.loads((run / "evidence.json").read_text())
    assert evidence["verdict"] == "passed"
    assert evidence["levels"][0]["output_tokens"] > 0
    assert evidence["thresholds"] == {"min_success_ratio": 1.0, "min_output_throughput": 1.0}
    badge = f"measured here: passed the chat-1k1k gate on {evidence['date']}, run {run.name}"
    status = engine.flashfleet("status", engine.stack)
    assert f"evidence: {badge}" in status.stdout, status.stdout + status.stderr
    # the stack's output, as Pulumi state keeps it: the next `up` reads the evidence
    engine.pulumi("up", "--yes", "--skip-preview", timed="pulumi up (the evidence output)")
    assert outputs(engine)["evidence"] == badge


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
    before = started(engine)
    done = engine.flashfleet("up", engine.stack, "--yes", timed="flashfleet up (option change)")
    assert done.returncode == 0, done.stdout + done.stderr
    for host in HOSTS:
        after = containers(engine, host)
        for launch in launches(engine)[host]:
            name = launch["container_name"]
            container = after[name]
            assert (container["Id"], container["State"]["StartedAt"]) != before[host][name], host
            assert NEW_NAME in container["Args"], container["Args"]
            assert container["State"]["Running"], container["State"]
            unit = f"{name}.service"
            assert ssh(engine, host, f"systemctl is-active {unit}").strip() == "active", (host, unit)
            assert NEW_NAME in ssh(engine, host, f"systemctl cat {unit}")
    # the benchmark measured the recipe before the change: its badge no longer speaks for it
    stale = outputs(engine)["evidence"]
    assert stale.startswith("evidence stale: the recipe not what run "), stale
    status = engine.flashfleet("status", engine.stack)
    assert f"evidence: {stale}" in status.stdout, status.stdout


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
    assert ssh(engine, host, "pgrep -f '[s]tandin_sglang' || true").strip() == ""
    assert ssh(engine, host, "docker ps -aq").strip() == ""
    assert json.loads(engine.export())["deployment"].get("resources") in (None, [])
