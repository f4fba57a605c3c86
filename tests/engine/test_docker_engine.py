"""The container_runtime role against a real Docker engine, and every catalog stack's docker
launch run as rendered on it (the contract between `flashfleet plan` and a real dockerd).

One sandbox limit is bridged, and only one: `--ulimit memlock=-1` needs CAP_SYS_RESOURCE, which
this sandbox lacks (runc: "error setting rlimit type 8: operation not permitted"), so the
contract test lowers that one value to the sandbox's hard limit. Real nodes grant it (RDMA).
"""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hosts.harness import LOGIN_USER

from .conftest import BASES, Engine

REPO = Path(__file__).parents[2]
# Every catalog stack whose nodes run docker: a Kubernetes stack's containers are the kubelet's.
STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml")
    for p in (REPO / "stacks").glob("Pulumi.*.yaml")
    if yaml.safe_load(p.read_text())["config"]["flashfleet:stack"]["nodes"]["source"]["kind"] != "kubernetes"
)
PROBE = "flashfleet-probe "
ROUTER = ["-m", "sglang_router.launch_router"]
SMG = ["smg", "launch"]
# what the real router prints once it listens: --mini-lb's uvicorn, or the Rust router (SMG's too)
ROUTER_UP = ("Uvicorn running on http://", "Starting server on")
_RUNS = itertools.count()  # one unit name per launch: a journal per container


def test_role_installs_the_real_engine_through_sudo(engine: Engine) -> None:
    install = engine.installs[0]
    # on failure, what each host's engine said: the daemon that failed to restart may be either
    journals = "\n".join(
        f"--- {host}:\n"
        + engine.sh(host, "journalctl -u docker -u containerd -n 60 -o cat --no-pager").stdout
        for host in ("h200", "mi355x")
        if not install.ok
    )
    assert install.ok, f"{install.summary()}\n{journals}"
    for host in ("h200", "mi355x"):
        # Docker's package names, the real Debian engine behind them
        packages = engine.sh(host, "dpkg-query -W -f '${Package} ${Version}\\n' docker-ce containerd").stdout
        assert f"docker-ce 5:{engine.version}-" in packages
        assert "containerd 1." in packages
        assert engine.sh(host, "dpkg -S /usr/sbin/dockerd").stdout.startswith("docker-ce:")
        assert f"version {engine.version}," in engine.sh(host, "/usr/sbin/dockerd --version").stdout
        assert (
            engine.sh(host, "docker version --format '{{.Server.Version}}'").stdout.strip() == engine.version
        )
        assert engine.sh(host, "systemctl is-active docker containerd").stdout.split() == ["active", "active"]
        # Ansible logged in as the non-root user and asked sudo for root
        sudo = engine.sh(host, "journalctl -t sudo -o cat --no-pager").stdout
        assert f"{LOGIN_USER} : PWD=" in sudo, sudo
        assert "USER=root" in sudo, sudo
    runtimes = json.loads(engine.sh("h200", "docker info --format '{{json .Runtimes}}'").stdout)
    assert runtimes["nvidia"]["path"] == "nvidia-container-runtime"
    assert engine.sh("h200", "docker info --format '{{.DefaultRuntime}}'").stdout.strip() == "nvidia"


def test_second_run_changes_nothing(engine: Engine) -> None:
    again = engine.play(["h200", "mi355x"])
    assert again.ok, again.summary()
    assert again.count("changed") == 0, again.summary()


def test_an_image_that_was_never_built_does_not_run(engine: Engine) -> None:
    # no registry is reachable: the engine looks locally, tries to pull, and fails
    never = engine.sh("h200", "docker run --rm flashfleet/sglang:v0.0.0-never-built true")
    assert never.returncode != 0
    assert "Unable to find image 'flashfleet/sglang:v0.0.0-never-built'" in never.stderr


def test_the_role_builds_the_image_the_launch_runs(engine: Engine) -> None:
    """The sglang_image role, in check mode against the real engine (the base is there, the
    derived image is not), names the image it builds; the launch must run exactly that image,
    or the unit's `docker run` asks a registry for a name nobody built."""
    launched = _plan("h200-lowlat")["nodes"][0]["processes"][0]["image"]
    run = engine.play(["h200"], tags="sglang_image", check=True)
    assert run.ok, run.summary()
    events = [json.loads(line) for line in run.events_log.read_text().splitlines()]
    # the role asks the real engine for the derived image under the name it then builds with
    # `docker build -t` (the same role argument): the engine has no such image yet
    probes = [
        e["event_data"]["res"]
        for e in events
        if e.get("event") == "runner_on_ok"
        and e["event_data"].get("task") == "Build | recipe of the derived image on the node"
    ]
    assert [p["cmd"][-1] for p in probes] == [launched]
    assert probes[0]["rc"] != 0
    assert "No such image" in probes[0]["stderr"], probes[0]["stderr"]
    build = [
        e for e in events
        if e["event_data"].get("task") == "Build | derived image (runs the multimodal check while building)"
        and e.get("event", "").startswith("runner_on_")
    ]  # fmt: skip
    assert build, "check mode did not reach the build of the missing image"


def test_gpu_requests_reach_the_vendor_hook(engine: Engine) -> None:
    image = BASES["h200"][0]
    ok = engine.sh("h200", f"docker run --rm --gpus '\"device=2,5\"' --entrypoint true {image}")
    assert ok.returncode == 0, ok.stderr
    requests = engine.sh("h200", "tail -1 /run/flashfleet-test/gpu-requests.jsonl").stdout
    assert json.loads(requests)["devices"] == [2, 5]
    # a GPU the node does not have is refused, as the real hook refuses it
    refused = engine.sh("h200", f"docker run --rm --gpus '\"device=8\"' --entrypoint true {image}")
    assert refused.returncode != 0
    assert "unknown device" in refused.stderr


def _plan(stack: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "flashfleet", "plan", stack, "--format", "json"],
                         check=True, capture_output=True, text=True, cwd=REPO)  # fmt: skip
    return dict(json.loads(out.stdout))


def _base_of(engine: Engine, host: str, image: str) -> str:
    """The pinned base the derived image is built from (the longest base tag it extends)."""
    tag = image.rsplit(":", 1)[1]
    bases = [b for b in BASES[host] if tag.startswith(b.rsplit(":", 1)[1])]
    assert bases, f"{image}: no pinned base on {host}"
    return max(bases, key=len)


def _memlock_hard_limit(engine: Engine, host: str) -> str:
    limit = engine.sh(host, "sh -c 'ulimit -Hl'").stdout.strip()
    return "-1" if limit == "unlimited" else str(int(limit) * 1024)


def _run_as_rendered(engine: Engine, host: str, unit: str, argv: list[str]) -> tuple[dict[str, Any], str]:
    """Starts the argv under a transient unit, waits for the container's probe line.

    The unit's output goes to a file, not to the journal: journald names a line's unit from the
    sender's cgroup, which it reads after the fact, so the last lines of a process that has
    already exited (a container that stops right after its probe, as h200-l3's does here with no
    Mooncake config on the test host) lose their unit under load, and `journalctl -u` misses them.
    """
    out = f"/run/{unit}.log"
    started = engine.sh(
        host,
        f"systemd-run --quiet --unit {unit} -p StandardOutput=append:{out} -p StandardError=append:{out}"
        f" -- {shlex.join(argv)}",
    )
    assert started.returncode == 0, started.stderr
    # A bound, not a speed target: dockerd on vfs in a test host that shares two cores with the
    # rest of the suite took more than 60 s to start one container in a CI run.
    deadline = time.monotonic() + 240
    log = ""
    while time.monotonic() < deadline:
        log = engine.sh(host, f"cat {out}").stdout
        lines = [line for line in log.splitlines() if line.startswith(PROBE)]
        if lines:
            return json.loads(lines[-1].removeprefix(PROBE)), log
        if engine.sh(host, f"systemctl is-active {unit}").stdout.strip() not in {"active", "activating"}:
            log = engine.sh(host, f"cat {out}").stdout  # what it wrote before it ended
            if any(line.startswith(PROBE) for line in log.splitlines()):
                continue
            break
        time.sleep(0.5)
    state = engine.sh(host, f"systemctl show -p ActiveState,SubState,ExecMainStatus {unit}").stdout.split()
    name = argv[argv.index("--name") + 1] if "--name" in argv else ""
    seen = engine.sh(
        host,
        "docker ps -a --no-trunc; "
        + (f"docker logs {shlex.quote(name)} 2>&1 | tail -40; " if name else "")
        + f"journalctl -u {unit} -o cat --no-pager; journalctl -u docker -n 40 -o cat --no-pager",
    ).stdout
    raise AssertionError(
        f"container did not start on {host} ({' '.join(state)}): {shlex.join(argv)}\n"
        f"its output:\n{log}\n{seen}"
    )


def _wait_for_output(engine: Engine, host: str, unit: str, lines: tuple[str, ...]) -> None:
    deadline, log = time.monotonic() + 120, ""
    while time.monotonic() < deadline:
        log = engine.sh(host, f"cat /run/{unit}.log").stdout
        if any(line in log for line in lines):
            return
        time.sleep(0.5)
    raise AssertionError(f"{unit} never printed any of {lines}:\n{log[-3000:]}")


def _stop(engine: Engine, host: str, unit: str, name: str) -> None:
    engine.sh(
        host,
        f"docker rm -f {name}; systemctl stop {unit}; systemctl reset-failed {unit}; rm -f /run/{unit}.log",
    )


@pytest.mark.parametrize("stack", STACKS)
def test_catalog_launch_runs_on_the_real_engine(engine: Engine, stack: str) -> None:
    plan = _plan(stack)
    processes = [p for n in plan["nodes"] for p in n.get("processes", []) if "docker_run" in p]
    assert processes, f"{stack} ({plan['source']['kind']}) plans no docker launch"
    for process in processes:
        host = "mi355x" if process["vendor"] == "amd" else "h200"
        image = process["image"]
        # The derived image is the sglang_image role's to build; here it is its base, re-tagged.
        engine.sh(
            host,
            f"docker image inspect {image} >/dev/null || docker tag {_base_of(engine, host, image)} {image}",
        )
        for mount in process["mounts"]:
            engine.sh(host, f"mkdir -p {shlex.quote(mount['source'])}")
        env_file = process["env_file"]
        secrets = "".join(f"{name}=test-value\n" for name in process["secret_env_names"])
        engine.sh(
            host, f"install -D -m 600 /dev/null {env_file} && printf %s {shlex.quote(secrets)} > {env_file}"
        )
        argv = list(process["docker_run"])
        memlock = _memlock_hard_limit(engine, host)
        lowered = [a if a != "memlock=-1" else f"memlock={memlock}" for a in argv]
        assert sum(a != b for a, b in zip(argv, lowered, strict=True)) <= 1  # only memlock changes
        unit = f"flashfleet-contract-{next(_RUNS)}"
        try:
            seen, log = _run_as_rendered(engine, host, unit, lowered)
            # after `sglang` / `python`; the image's `smg` is SMG's console script, `python -m smg`
            smg = process["argv"][:2] == SMG
            assert seen["argv"] == (["-m", "smg"] if smg else []) + process["argv"][1:], log
            assert set(process["secret_env_names"]) | set(process["env"]) <= set(seen["env"]), log
            host_ns = {
                k: engine.sh(host, f"readlink /proc/1/ns/{k}").stdout.strip() for k in ("ipc", "net", "pid")
            }
            assert seen["ns"]["ipc"] == host_ns["ipc"]  # --ipc host
            assert seen["ns"]["net"] == host_ns["net"]  # --network host
            assert seen["ns"]["pid"] != host_ns["pid"]  # still a container
            for mount in process["mounts"]:
                assert mount["target"] in seen["mounts"], (mount, log)
            for device in process["devices"]:
                assert device in seen["devices"], (device, log)
            ulimits = process["ulimits"]
            assert seen["stack"] == [int(ulimits["stack"])] * 2
            assert seen["memlock"] == [int(memlock) if memlock != "-1" else -1] * 2
            if "video" in process["group_add"]:
                assert 44 in seen["groups"]  # the image's video group
            if process["vendor"] == "nvidia" and process["gpus"]:
                last = engine.sh(host, "tail -1 /run/flashfleet-test/gpu-requests.jsonl").stdout
                assert json.loads(last)["devices"] == process["gpus"]
            if process["argv"][1:3] == ROUTER or smg:  # the real router starts
                _wait_for_output(engine, host, unit, ROUTER_UP)
        finally:
            _stop(engine, host, unit, process["container_name"])
