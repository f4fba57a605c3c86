"""site.yml (Mooncake, serve, verify) and teardown.yml on real systemd test hosts, each running
the real Docker engine: the serving units' `docker run` starts the stand-in SGLang image
(tests/serve/lab.py; the OpenAI-compatible stand-in server, the real router, Mooncake's store
client), so flags, restarts, mounts and logs are Docker's.

The prepare phase (drivers, container runtime, image, weights) needs the GPU and apt fixtures of
tests/roles, where it runs. Here site.yml runs with its other tags, on one bring-up of four
hosts: the first run, a second that changes nothing, the converge record's skip and drift
checks (without `reconverge`, the path `flashfleet configure` and `pulumi up` take), the smoke
checks, logs, the PD router, and teardown."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from flashfleet.bringup.playbook_run import RunResult
from flashfleet.bringup.timeline import build_timeline, read_events
from flashfleet.launch import CONTAINER_HF_CACHE

from .lab import MOONCAKE_CACHE, TOKEN, ServeLab, make_stack, serve_lab

HOSTS = ["l3a", "l3b", "epd", "pd"]
LOAD_SECONDS = 3
JIT_SECONDS = 2  # the stand-in's JIT builds on a cold kernel cache
TRICKY = 'glm $HOME %h "quoted" back\\slash'  # systemd would expand $, % and eat quotes unescaped
SITE_TAGS = "mooncake,serve,verify"
FAST = {"sglang_serve_ready_timeout_s": 60, "sglang_serve_ready_poll_s": 1}


@pytest.fixture(scope="module")
def site() -> Iterator[dict[str, Any]]:
    with serve_lab(HOSTS) as lab:
        for host in HOSTS:
            set_knobs(lab, host, image_mode="pixels")
        a = lab.address
        stacks = [
            (make_stack("l3", "unified", [a("l3a"), a("l3b")],
                        options={"hicache": "l1l2l3", "hicache_size": 10,
                                 "extra_args": ["--served-model-name", TRICKY]},
                        mooncake={"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 1}),
             ["l3a", "l3b"]),
            (make_stack("epd", "encoder-disagg", [a("epd")]), ["epd"]),
            (make_stack("pd", "pd", [a("pd")], strategy="high-throughput"), ["pd"]),
        ]  # fmt: skip
        inventory = lab.inventory(*stacks)
        first = lab.run("site.yml", inventory, tags=SITE_TAGS, extravars=FAST)
        state = {
            "lab": lab,
            "inventory": inventory,
            "stacks": stacks,
            "runs": [first],
            "first_explain": lab.explain(first),
        }
        yield state


def set_knobs(lab: ServeLab, host: str, **knobs: Any) -> None:
    lab.set_knobs(host, {"load_seconds": LOAD_SECONDS, "jit_seconds": JIT_SECONDS, **knobs})


def containers(lab: ServeLab, host: str) -> dict[str, dict[str, Any]]:
    """Docker's record (`docker inspect`) of each running container on `host`, by name."""
    return {c["Name"].removeprefix("/"): c for c in lab.containers(host)}


def started(container: dict[str, Any]) -> float:
    """When Docker started the container (its RFC 3339 time, cut to microseconds)."""
    stamp = container["State"]["StartedAt"]
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00").timestamp()


def docker_options(docker_run: list[str], image: str) -> dict[str, list[str]]:
    """The options of a rendered `docker run` before its image, by flag."""
    options: dict[str, list[str]] = {}
    words = docker_run[2 : docker_run.index(image)]
    at = 0
    while at < len(words):
        if words[at] in ("--rm", "-d", "-i", "-t", "--init"):
            options.setdefault(words[at], [])
            at += 1
        else:
            options.setdefault(words[at], []).append(words[at + 1])
            at += 2
    return options


def assert_docker_took(launch: dict[str, Any], container: dict[str, Any]) -> None:
    """What Docker made of each option of the launch's `docker run` (flags Docker did not know,
    or values it read otherwise, would fail the run or show here)."""
    host_config = container["HostConfig"]
    options = docker_options(launch["docker_run"], launch["image"])
    assert container["Config"]["Image"] == launch["image"]
    assert host_config["AutoRemove"] == ("--rm" in options)
    assert host_config["NetworkMode"] == options["--network"][0]
    assert host_config["IpcMode"] == options["--ipc"][0]
    assert host_config["ShmSize"] == int(options["--shm-size"][0].removesuffix("g")) << 30
    assert sorted(host_config["Binds"] or []) == sorted(options.get("-v", []))
    assert sorted(host_config["CapAdd"] or []) == sorted(options.get("--cap-add", []))
    ulimits = {u["Name"]: u["Hard"] for u in host_config["Ulimits"] or []}
    for ulimit in options.get("--ulimit", []):
        name, _, value = ulimit.partition("=")
        if name != "memlock":  # the one value sandbox-docker lowers (tests/serve/lab.py)
            assert ulimits[name] == int(value), ulimit
    gpus = [r["DeviceIDs"] for r in host_config["DeviceRequests"] or []]
    if "--gpus" in options:
        wanted = options["--gpus"][0].strip('"').removeprefix("device=").split(",")
        assert gpus == [wanted], gpus
    else:
        assert gpus == []
    devices = sorted(d["PathOnHost"] for d in host_config["Devices"] or [])
    assert devices == sorted(options.get("--device", [])), devices


def launches(state: dict[str, Any], host: str) -> list[dict[str, Any]]:
    hosts = state["inventory"]["all"]["hosts"]
    name = next(n for n, v in hosts.items() if v["ansible_host"] == state["lab"].address(host))
    return list(hosts[name]["flashfleet_processes"])


def test_site_brings_every_node_up(site: dict[str, Any]) -> None:
    first: RunResult = site["runs"][0]
    assert first.ok, site["first_explain"]
    for host in HOSTS:
        for launch in launches(site, host):
            unit = f"{launch['container_name']}.service"
            assert site["lab"].ssh(host, f"systemctl is-active {unit}").strip() == "active", unit


def test_each_container_is_the_recipe_engines_docker_run(site: dict[str, Any]) -> None:
    lab = site["lab"]
    for host in HOSTS:
        running = containers(lab, host)
        assert sorted(running) == sorted(launch["container_name"] for launch in launches(site, host))
        for launch in launches(site, host):
            container = running[launch["container_name"]]
            assert container["Config"]["Cmd"] == launch["argv"]
            env = dict(item.split("=", 1) for item in container["Config"]["Env"])
            assert {k: env[k] for k in launch["env"]} == launch["env"]
            if launch["env_file"]:
                assert env["HF_TOKEN"] == TOKEN  # reached the container through --env-file
            assert_docker_took(launch, container)
    l3 = containers(lab, "l3a")["flashfleet-server-0"]["Config"]["Cmd"]
    assert l3[l3.index("--served-model-name") + 1] == TRICKY
    # --gpus reached the (stand-in) NVIDIA prestart hook through runc, as on a node, with the
    # devices of each container's own request
    hook = lab.ssh("pd", "cat /run/flashfleet-test/gpu-requests.jsonl").splitlines()
    devices = {r["id"]: r["devices"] for r in map(json.loads, hook)}
    running = containers(lab, "pd")
    assert devices[running["flashfleet-prefill"]["Id"]] == [0, 1, 2, 3]
    assert devices[running["flashfleet-decode"]["Id"]] == [4, 5, 6, 7]
    assert running["flashfleet-router"]["Id"] not in devices


def test_start_order_waits_for_readiness(site: dict[str, Any]) -> None:
    lab = site["lab"]
    for host, first, then in (("epd", ["encoder"], "language"), ("pd", ["prefill", "decode"], "router")):
        running = containers(lab, host)
        for dep in first:
            # the dependent starts only once its dependency answers /health (after loading)
            assert (
                started(running[f"flashfleet-{then}"]) >= started(running[f"flashfleet-{dep}"]) + LOAD_SECONDS
            )
        unit = lab.ssh(host, f"systemctl cat flashfleet-{then}.service")
        for dep in first:
            assert f"flashfleet-{dep}.service" in unit.split("Requires=")[1].splitlines()[0]


def test_smoke_checks_ran_against_each_api(site: dict[str, Any]) -> None:
    events = [json.loads(line) for line in site["runs"][0].events_log.read_text().splitlines()]
    passed = {
        (e["event_data"]["host"], e["event_data"]["task"]) for e in events if e.get("event") == "runner_on_ok"
    }
    for host in ("l3-node-0", "epd-node-0", "pd-node-0"):
        assert (host, "Model | remember its id") in passed
        assert sum(1 for h, t in passed if h == host and t.startswith("Image | the answer names")) == 3
    assert ("l3-node-0", "Tools | the call came back in tool_calls") in passed
    assert ("l3-node-0", "Mooncake | every serving node has a segment") in passed
    assert ("l3-node-1", "Model | remember its id") not in passed  # rank 1 serves no API


def _node(site: dict[str, Any], host: str) -> str:
    hosts = site["inventory"]["all"]["hosts"]
    return next(n for n, v in hosts.items() if v["ansible_host"] == site["lab"].address(host))


def test_each_server_reports_its_own_start_and_built_its_kernels_on_the_cache_volume(
    site: dict[str, Any],
) -> None:
    lab = site["lab"]
    startup = build_timeline(read_events(site["runs"][0].events_log)).startup
    for host in HOSTS:
        node = _node(site, host)
        printing = [launch["container_name"] for launch in launches(site, host) if launch["prints_startup"]]
        assert sorted(startup.get(node, {})) == sorted(printing), node  # not the router, not rank 1
        for name, t in startup.get(node, {}).items():
            assert t.load_s == LOAD_SECONDS, (node, name)
            assert t.ready_s is not None, (node, name)
        if printing:
            # the node's first server of the image found its kernel cache cold and built it; one
            # started after it on the same node (epd's language, after the encoder) finds it warm
            builds = [t.jit_s for t in startup[node].values()]
            assert max(builds) >= JIT_SECONDS - 0.5, (node, startup[node])
        # the kernels are on the node's cache volume, in the image's folder
        cache = site["inventory"]["all"]["hosts"][node]["flashfleet_model_cache_dir"]
        for launch in launches(site, host):
            if launch["prints_startup"]:
                folder = launch["env"]["TVM_FFI_CACHE_DIR"].replace(CONTAINER_HF_CACHE, cache, 1)
                assert lab.ssh(host, f"ls {folder}").split() == ["standin-kernels.so"], (host, folder)
    assert startup["epd-node-0"]["flashfleet-language"].jit_s < JIT_SECONDS - 0.5
    # a restart on the same disk: the encoder and, through Requires=, the language server after it
    lab.ssh("epd", "systemctl restart flashfleet-encoder.service")


def test_second_run_changes_nothing(site: dict[str, Any]) -> None:
    """With `reconverge` (flashfleet configure --reconverge, and every other run of this module
    but the converge record's): every role runs again, and none changes anything."""
    lab = site["lab"]
    again = lab.run("site.yml", site["inventory"], tags=SITE_TAGS, extravars=FAST)
    site["runs"].append(again)
    assert again.ok, lab.explain(again)
    assert again.count("changed") == 0, [str(p) for p in lab.progress if p.status == "changed"]
    for node in ("l3-node-0", "epd-node-0", "pd-node-0"):
        assert {"sglang_serve", "verify"} <= roles_ran(lab, node), node
    assert "mooncake" in roles_ran(lab, "l3-node-0")


def test_a_restarted_server_finds_its_kernels_built_and_the_others_keep_their_start(
    site: dict[str, Any],
) -> None:
    """The re-run above read each server's current start: the restarted ones' (warm), the
    others' first one (cold), never an earlier start's lines."""
    again = build_timeline(read_events(site["runs"][1].events_log)).startup
    for name, t in again["epd-node-0"].items():
        assert t.jit_s < JIT_SECONDS - 0.5, (name, t)
        assert t.load_s == LOAD_SECONDS  # the weights load again: only the kernels were kept
    first = build_timeline(read_events(site["runs"][0].events_log)).startup
    assert again["l3-node-0"] == first["l3-node-0"]


HARNESS_UNIT = "flashfleet-test-cgroup-rw.service"

# The converge record: the path `flashfleet configure` and `pulumi up` take (no `reconverge`).
RECORD = "/var/lib/flashfleet/converge.json"


def roles_ran(lab: ServeLab, node: str | None = None) -> set[str]:
    """Roles that ran at least one task of their own that was not skipped (on `node`, or
    anywhere): not the converge check, nor the argument validation Ansible runs as a role starts."""
    return {
        p.role
        for p in lab.progress
        if p.role
        and p.role != "converge"
        and p.status != "skipped"
        and node in (None, p.host)
        and not p.task.startswith("Validating arguments against arg spec")
    }


def converge(site: dict[str, Any], inventory: dict[str, Any] | None = None) -> RunResult:
    lab: ServeLab = site["lab"]
    result = lab.run(
        "site.yml", inventory or site["inventory"], tags=SITE_TAGS, extravars=FAST, reconverge=False
    )
    assert result.ok, lab.explain(result)
    return result


def test_the_record_is_root_only_and_a_rerun_skips_every_role_on_every_node(site: dict[str, Any]) -> None:
    lab = site["lab"]
    for host in HOSTS:
        out = lab.ssh(host, f"stat -c '%a %U' {RECORD} && cat {RECORD}")
        mode, _, body = out.partition("\n")
        assert mode == "600 root", host
        record = json.loads(body)["roles"]
        assert {"sglang_serve", "verify"} <= set(record), host
        # every entry carries what its drift check reads back: the serving units among them
        units = record["sglang_serve"]["snapshot"]["units"]
        assert units, host
        assert all("ActiveState=active" in u for u in units.values()), units
    assert "mooncake" in json.loads(lab.ssh("l3a", f"cat {RECORD}"))["roles"]
    again = converge(site)
    assert again.count("changed") == 0
    assert roles_ran(lab) == set(), [str(p) for p in lab.progress if p.status != "skipped"]
    # the skip path runs one command on each node: the converge check
    checked = {
        p.host for p in lab.progress if p.status == "ok" and p.role == "converge" and "what changed" in p.task
    }
    assert checked == set(site["inventory"]["all"]["hosts"])


def test_a_hand_edited_unit_is_caught_and_restored_on_its_node_alone(site: dict[str, Any]) -> None:
    lab = site["lab"]
    unit = site["inventory"]["all"]["hosts"]["l3-node-0"]["flashfleet_processes"][0]["container_name"]
    path = f"/etc/systemd/system/{unit}.service"
    before = lab.ssh("l3a", f"cat {path}")
    lab.ssh("l3a", f"sed -i 's/^Restart=.*/Restart=no/' {path} && systemctl daemon-reload")
    assert lab.ssh("l3a", f"cat {path}") != before
    fixed = converge(site)
    assert lab.ssh("l3a", f"cat {path}") == before
    assert fixed.count("changed") > 0
    ran = roles_ran(lab, "l3-node-0")
    assert {"sglang_serve", "verify"} <= ran, ran
    assert "mooncake" not in ran, ran
    for node in ("l3-node-1", "epd-node-0", "pd-node-0"):
        assert roles_ran(lab, node) == set(), node
    # and the run after the repair skips again
    converge(site)
    assert roles_ran(lab) == set()


def test_a_stopped_service_is_caught_and_started(site: dict[str, Any]) -> None:
    lab = site["lab"]
    lab.ssh("l3a", "systemctl stop mooncake-master.service")
    converge(site)
    assert lab.ssh("l3a", "systemctl is-active mooncake-master.service").strip() == "active"
    # the master came first in the chain: everything after it ran as well
    assert {"mooncake", "sglang_serve", "verify"} <= roles_ran(lab, "l3-node-0")


def test_a_changed_input_reruns_only_the_roles_that_read_it(site: dict[str, Any]) -> None:
    inventory = copy.deepcopy(site["inventory"])
    facts = inventory["all"]["hosts"]["l3-node-0"]
    assert facts["flashfleet_tool_calls"] is True
    facts["flashfleet_tool_calls"] = False  # only the verify play reads it
    converge(site, inventory)
    assert roles_ran(site["lab"]) == {"verify"}
    ran_verify = {host for host in site["inventory"]["all"]["hosts"] if roles_ran(site["lab"], host)}
    assert ran_verify == {"l3-node-0"}
    converge(site, inventory)
    assert roles_ran(site["lab"]) == set()


def test_a_wheel_changed_on_a_node_is_copied_again_and_only_it(site: dict[str, Any]) -> None:
    lab = site["lab"]
    wheels = sorted(p.name for p in (MOONCAKE_CACHE / "wheels").glob("*.whl"))
    assert len(wheels) > 1
    node_dir = "/opt/flashfleet/mooncake/wheels"
    lab.ssh("l3b", f"truncate -s 10 {node_dir}/{wheels[0]}")
    before = lab.ssh("l3b", f"stat -c %Y {node_dir}/{wheels[-1]}")
    run = lab.run("site.yml", site["inventory"], tags="mooncake", extravars=FAST)
    assert run.ok, lab.explain(run)
    changed = {(p.host, p.task) for p in lab.progress if p.status == "changed"}
    l3b = next(
        n for n, v in site["inventory"]["all"]["hosts"].items() if v["ansible_host"] == lab.address("l3b")
    )
    assert changed == {(l3b, "wheels onto the node")}
    assert lab.ssh("l3b", f"sha1sum < {node_dir}/{wheels[0]}").split()[0] == _sha1(
        MOONCAKE_CACHE / "wheels" / wheels[0]
    )
    assert lab.ssh("l3b", f"stat -c %Y {node_dir}/{wheels[-1]}") == before  # the others stay as they were


def test_a_locked_mooncake_wheel_is_installed_from_its_locked_bytes_and_other_bytes_refused(
    site: dict[str, Any],
) -> None:
    from packaging.requirements import Requirement

    from flashfleet.package_index import resolve_package

    lab: ServeLab = site["lab"]
    hosts = site["inventory"]["all"]["hosts"]
    l3 = [n for n, v in hosts.items() if v["flashfleet_mooncake"]]
    wanted = Requirement(hosts[l3[0]]["flashfleet_mooncake_layout"]["wheel"])
    # `flashfleet lock` on the wheel folder the nodes install from (mooncake_wheels_dir)
    locked = resolve_package(wanted.name, str(wanted.specifier), find_links=str(MOONCAKE_CACHE / "wheels"))

    def with_lock(lock: dict[str, Any]) -> dict[str, Any]:
        inventory = copy.deepcopy(site["inventory"])
        for name in l3:
            inventory["all"]["hosts"][name]["flashfleet_mooncake_layout"]["lock"] = lock
        return inventory

    run = lab.run("site.yml", with_lock(locked.model_dump()), tags="mooncake", extravars=FAST)
    assert run.ok, lab.explain(run)
    reinstalled = {p.host for p in lab.progress if p.task == "the locked wheel in its own virtualenv"}
    assert reinstalled == set(l3)  # once, from the locked file: the venv held an unlocked install
    held = lab.ssh("l3a", "cat /opt/flashfleet/mooncake/venv/flashfleet-locked.txt")
    assert held.startswith(f"{wanted.name}=={locked.version} --hash=sha256:"), held
    again = lab.run("site.yml", with_lock(locked.model_dump()), tags="mooncake", extravars=FAST)
    assert again.count("changed") == 0  # the venv holds this lock's wheel: nothing fetched again

    # a lock of other bytes than the folder serves: refused on every L3 node, the file named
    [(wheel_file, _)] = locked.files.items()
    other = {"version": locked.version, "files": {wheel_file: {"sha256": "0" * 64}}}
    refused = lab.run("site.yml", with_lock(other), tags="mooncake", extravars=FAST)
    assert not refused.ok
    assert {f.host for f in refused.failures} == set(l3)
    for failure in refused.failures:
        assert failure.task == "the locked wheel in its own virtualenv", failure
        assert f"Expected sha256 {'0' * 64}" in failure.message, failure.message
    # and the nodes keep the locked wheel they hold; the stack without a lock runs as before
    assert lab.ssh("l3a", "cat /opt/flashfleet/mooncake/venv/flashfleet-locked.txt") == held
    restored = lab.run("site.yml", site["inventory"], tags="mooncake", extravars=FAST)
    assert restored.ok, lab.explain(restored)


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def test_verify_catches_a_server_that_ignores_images(site: dict[str, Any]) -> None:
    lab = site["lab"]
    set_knobs(lab, "epd", image_mode="text-only")
    try:
        caught = lab.run("verify.yml", site["inventory"], extravars=FAST)
    finally:
        set_knobs(lab, "epd", image_mode="pixels")
    site["runs"].append(caught)
    assert not caught.ok
    assert {f.host for f in caught.failures} == {"epd-node-0"}
    assert "did not read the image" in caught.failures[0].message


def test_token_is_in_no_log_event_unit_or_process_list(site: dict[str, Any]) -> None:
    lab = site["lab"]
    for run in site["runs"]:
        for path in run.run_dir.iterdir():
            assert TOKEN not in path.read_text(), path
    for host in HOSTS:
        assert TOKEN not in lab.ssh(host, "cat /etc/systemd/system/flashfleet-*.service")
        assert TOKEN not in lab.ssh(host, "ps -eo args ww")
        assert TOKEN not in lab.ssh(host, "journalctl --no-pager -o cat", check=False)
        assert lab.ssh(host, "stat -c '%a %U' /etc/flashfleet/secrets.env").split() == ["600", "root"]


def test_logs_prints_each_serving_containers_output(
    site: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flashfleet.cli import main

    lab = site["lab"]
    pd_only = lab.inventory((site["stacks"][2][0], ["pd"]))
    path = tmp_path / "pd.json"
    path.write_text(json.dumps(pd_only))
    before = {c["Id"]: c["State"]["StartedAt"] for c in containers(lab, "pd").values()}
    argv = ["logs", "pd", "--inventory", str(path), "--lines", "50", "--runs-dir", str(tmp_path / "runs")]
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    for launch in launches(site, "pd"):
        header = f"==> pd-node-0 {launch['container_name']} <=="
        assert header in out, out
        section = out.split(header, 1)[1].split("==> ", 1)[0]
        if launch["argv"][:2] == ["smg", "launch"]:  # SMG logs every request: its own lines, not its first
            assert re.search(r'module="smg" .*smg::response', section), section
        elif launch.get("port"):  # a server: its container's own first line, from the unit's journal
            assert re.search(rf"Uvicorn running on http://\S*:{launch['port']} ", section), section
    # only node 0 exists: another is refused before any host is touched
    assert main([*argv, "--node", "1"]) == 2
    assert "--node 1: no such serving node (the stack's: 0)" in capsys.readouterr().err
    # it read, it started nothing (Docker's ids and start times are the same)
    assert {c["Id"]: c["State"]["StartedAt"] for c in containers(lab, "pd").values()} == before


def test_the_pd_router_is_the_real_one_and_the_pair_shares_the_work(site: dict[str, Any]) -> None:
    """The router container runs SMG itself (`smg launch`, its Rust PD router in place of the
    seed's --mini-lb); verify's requests went through it to both servers, bootstrap fields and
    all: the prefill counted the prompts, the decode the output tokens and no prompt of its own."""
    lab = site["lab"]
    processes = lab.ssh("pd", "ps -eo args ww")
    assert "smg::router" in processes  # smg launch_router's own process title
    counters = {}
    for launch in launches(site, "pd"):
        role = launch["container_name"].removeprefix("flashfleet-")
        if role in ("prefill", "decode"):
            get = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{launch['port']}/metrics').read().decode())"
            metrics = lab.ssh("pd", f"python3 -c {shlex.quote(get)}")
            counters[role] = {
                m.group(1): float(m.group(2))
                for m in re.finditer(r"^sglang:(\w+)_total\{[^}]*\} (\S+)$", metrics, re.M)
            }
    assert counters["prefill"]["prompt_tokens"] > 0
    assert counters["decode"]["prompt_tokens"] == 0
    assert counters["decode"]["generation_tokens"] > 0
    assert counters["decode"]["num_requests"] == counters["prefill"]["num_requests"] > 0


def test_teardown_leaves_nothing_running_and_skips_a_gone_host(site: dict[str, Any]) -> None:
    lab = site["lab"]
    inventory = json.loads(json.dumps(site["inventory"]))
    gone = {
        **inventory["all"]["hosts"]["pd-node-0"],
        "ansible_host": f"{lab.pool.gateway.rsplit('.', 1)[0]}.250",
    }
    inventory["all"]["hosts"]["gone-node-0"] = gone
    inventory["all"]["children"]["flashfleet"]["hosts"]["gone-node-0"] = {}
    started = time.monotonic()
    down = lab.run("teardown.yml", inventory)
    assert down.ok, lab.explain(down)
    # the gone host costs its connect timeout, not a hang (a generous bound: CI machines are busy)
    assert time.monotonic() - started < 600
    events = down.events_log.read_text()
    assert "WARNING: unreachable, skipped (nothing to stop there): gone-node-0" in events
    # the test host's own unit (writable cgroups for its engine, tests/hosts/harness.py) stays
    harness = f"grep -v -e {HARNESS_UNIT}"
    for host in HOSTS:
        left = f"ls /etc/systemd/system | grep -e flashfleet- -e mooncake | {harness} | wc -l"
        assert lab.ssh(host, left).strip() == "0"
        units = "systemctl list-units --all --plain --no-legend 'flashfleet-*' 'mooncake*'"
        assert lab.ssh(host, f"{units} | {harness} || true").strip() == ""
        assert lab.ssh(host, "docker ps --all --quiet").strip() == ""
        assert "standin_sglang" not in lab.ssh(host, "ps -eo args ww")
        assert "mooncake_master" not in lab.ssh(host, "ps -eo args ww")
        assert lab.ssh(host, "test -e /etc/flashfleet/secrets.env || echo gone").strip() == "gone"
        assert lab.ssh(host, f"test -e {RECORD} || echo gone").strip() == "gone"  # the converge record
