"""Bring-up time on the systemd test hosts: the whole site.yml as the product runs it, 1 vs 4 hosts.

`flashfleet up`, `flashfleet configure` and the Pulumi bring-up resource run site.yml once
(prepare roles, Mooncake, serve, verify); so does every converge measured here, on the hosts of
tests/roles (local vendor apt repository, stand-in Hub and images) with
tests/serve/fake_docker.py named to the roles as their docker (it starts an OpenAI-compatible
stand-in), and the flat repository of 30-mooncake.sh as the hosts' distribution archive. The
inventory is flashfleet.inventory's, from a unified H200 stack with a Mooncake L3 tier.

Per host count (1, then 4): the first converge; then Ansible's floor (a no-op playbook on the
same hosts: facts and one task) and the second converge (converge records: each unchanged role
ends itself on each node, changed=0), alternating, three of each, medians compared (one sample
of a few seconds is noise on a shared machine); then a full one (`reconverge`, as `configure
--reconverge`: every role again, Ansible's idempotence alone). Per-phase seconds come from the
run's events. Each run also records the CPU seconds of the controller (this process,
ansible-playbook and its SSH connections), of each host (its nspawn process tree) and of the
whole machine, so the note can tell whether 4 hosts are CPU-bound on a small machine.

Prints figures and ratios measured side by side in one run; asserts nothing (speed targets live
here, not in tests). Needs root and the test-host cache (scripts/setup.d/20-test-hosts.sh,
30-mooncake.sh), like tests/roles, tests/serve and tests/e2e.

`--after-down` measures the other second run instead: the first bring-up of a stack, then
`down` (teardown.yml, caches kept: teardown.keepCaches defaults to true), then the same bring-up
again, side by side in one run on one host: the second/first ratio, each phase of both, what the
second asked of the stand-in Hub (nothing, when the cache was kept), and each server's own
startup timings from its log (the stand-in's load, and its JIT builds, which a kept kernel cache
skips).

Both bring-ups' time to first token (ttft: from the run's start until every node that serves the
API answered verify's first chat request) are printed side by side, with their ratio (goal: 0.4
or less). `--nodes N` spans one server across N hosts (multi-node TP), each with its own kernel
cache. `--engine` runs the same on tests/serve's hosts, where the real Docker engine runs the
stand-in image (the hosts come prepared: only the serve and verify plays run, as tests/serve does).

`--against REV` also runs the same measurement as the project stood at git revision REV (its
own benchmark, roles, playbooks and package, from a scratch worktree) in the same run, before
this tree's, and prints the two side by side: a change to the converge records shows its
rerun_ratio before and after.

Usage: python benchmarks/bringup.py [--format json] [--keep DIR] [--after-down [--engine] [--nodes N]]
       [--against REV]
Goals: rerun_ratio = second_s / noop_s <= 1.3; hosts4_ratio = four_hosts_s / one_host_s <= 1.3;
after `down`, hub_file_gets of the second bring-up = 0 and second_ratio well under 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

from hosts.harness import HostSpec, process_cpu  # noqa: E402
from roles.conftest import Lab, open_lab  # noqa: E402
from roles.hardware import H200, NVIDIA_DEVICES  # noqa: E402
from roles.test_preflight import SMALL_SIZES  # noqa: E402
from serve.lab import MOONCAKE_CACHE, ServeLab, make_stack, serve_lab  # noqa: E402

from flashfleet.bringup.playbook_run import RunResult, run_playbook  # noqa: E402
from flashfleet.bringup.timeline import build_timeline, read_events, write_timeline  # noqa: E402
from flashfleet.planning import StackPlan  # noqa: E402

ONE, FOUR = ["b1"], ["q0", "q1", "q2", "q3"]
REPEATS = 3  # no-op and re-run samples per host count (medians compared)
# site.yml's imported playbooks, by the prefix of their plays' names
PHASES = {"Prepare": "prepare", "Mooncake": "mooncake", "Serve": "serve", "Verify": "verify"}
# beside the docker the container_runtime role installs, which would replace it at /usr/bin
FAKE_DOCKER = "/usr/local/lib/fake-docker/docker"
SERVE = REPO / "tests/serve"


def install_fake_docker(root: Path) -> None:
    lib = root / "usr/local/lib/fake-docker"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "standin_sglang.py").write_text((SERVE / "standin_sglang.py").read_text())
    (lib / "docker").write_text((SERVE / "fake_docker.py").read_text())
    (lib / "docker").chmod(0o755)


# the test hosts have ~20 GiB of memory, not a node's 2 TB: ask for what they have
SMALL_MEMORY = {
    "preflight_host_memory_gb": 1, "preflight_hicache_host_gb": 1, "preflight_memory_reserve_gb": 1,
}  # fmt: skip
FAST_SERVE = {"sglang_serve_ready_timeout_s": 60, "sglang_serve_ready_poll_s": 1}
NOOP = """---
- name: Noop | gather facts and say so
  hosts: all
  gather_facts: true
  tasks:
    - name: Noop | one debug task
      ansible.builtin.debug:
        msg: noop
"""
CONTROL_DIR = "ANSIBLE_SSH_CONTROL_PATH_DIR"


class Failed(RuntimeError):
    pass


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat), whoever's work it was."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """This process and the children it has waited for (ansible-playbook and its workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def ssh_masters(control_dir: Path) -> dict[int, float]:
    """The SSH connection masters of one run (pid -> CPU seconds): ControlPersist detaches them
    from ansible-playbook, so they are found by their control sockets' directory."""
    out = {}
    for pid, (_, cpu) in process_cpu().items():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(control_dir).encode() in cmdline and cmdline.startswith(b"ssh"):
            out[pid] = cpu
    return out


def measured(
    label: str, lab: Lab, hosts: Sequence[str], keep: Path | None, run: Callable[[], RunResult]
) -> tuple[float, RunResult, dict[str, Any]]:
    """Runs one playbook with its own SSH control directory; wall seconds, result and CPU seconds."""
    control_dir = Path(tempfile.mkdtemp(prefix="ffcp-"))
    before = {h: lab.pool.cpu_seconds(h) for h in hosts}
    before_own, before_machine = own_cpu_s(), machine_busy_s()
    os.environ[CONTROL_DIR] = str(control_dir)
    start = time.perf_counter()
    try:
        result = run()
        took = time.perf_counter() - start
        host_cpu = {h: round(lab.pool.cpu_seconds(h) - before[h], 2) for h in hosts}
        masters = ssh_masters(control_dir)
        controller = own_cpu_s() - before_own + sum(masters.values())
        machine = machine_busy_s() - before_machine
    finally:
        del os.environ[CONTROL_DIR]
        for pid in ssh_masters(control_dir):  # this run's own connections, not reused by the next
            os.kill(pid, 15)
        shutil.rmtree(control_dir, ignore_errors=True)
    if not result.ok:
        raise Failed(f"{label}: {result.summary()}")
    cores = os.cpu_count() or 1
    cpu = {
        "controller": round(controller, 2),
        "hosts": round(sum(host_cpu.values()), 2),
        "by_host": host_cpu,
        "ssh_masters": len(masters),
        "machine": round(machine, 2),
        # (controller + hosts) / (wall x cores): near 1, the run waited for CPU
        "bound_ratio": round((controller + sum(host_cpu.values())) / (took * cores), 2),
        # every core's busy time, other jobs on the machine included
        "machine_busy_ratio": round(machine / (took * cores), 2),
    }
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        events = keep / f"{label}.events.jsonl"
        shutil.copy(result.events_log, events)
        write_timeline(events, keep / f"{label}.timeline.png")
    print(f"  {label}: {took:.1f} s, changed={result.count('changed')}, cpu={cpu}", file=sys.stderr)
    return took, result, cpu


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def phase_seconds(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per phase of site.yml: from the start of its first play to the start of the next phase's
    (the last phase: to the run's last event), so the phases add up to the run."""
    timed = [e for e in events if e.get("created")]
    plays = [
        (_ts(e["created"]), str((e.get("event_data") or {}).get("play") or ""))
        for e in timed
        if e.get("event") == "playbook_on_play_start"
    ]
    if not plays:
        return {}
    end = max(_ts(e["created"]) for e in timed)
    out = dict.fromkeys(PHASES.values(), 0.0)
    for i, (start, name) in enumerate(plays):
        stop = plays[i + 1][0] if i + 1 < len(plays) else end
        out[PHASES.get(name.partition(" | ")[0], "prepare")] += stop - start
    return {k: round(v, 2) for k, v in out.items()}


FIRST_TOKEN_TASK = "Chat | thinking on"  # verify's first request that generates tokens


def first_token_s(events: Iterable[Mapping[str, Any]]) -> float | None:
    """Time to first token of a bring-up: from the run's first event to the moment the last node
    that serves the API had answered verify's first chat request (its first generated tokens)."""
    timed = [e for e in events if e.get("created")]
    if not timed:
        return None
    start = min(_ts(e["created"]) for e in timed)
    first: dict[str, float] = {}
    for e in timed:
        data = e.get("event_data") or {}
        if e.get("event") == "runner_on_ok" and data.get("task") == FIRST_TOKEN_TASK:
            host = str(data.get("host"))
            first[host] = min(first.get(host, float("inf")), _ts(e["created"]))
    return round(max(first.values()) - start, 2) if first else None


def noop(
    lab: Lab, slab: ServeLab, stack: StackPlan, hosts: Sequence[str], keep: Path | None, *, label: str
) -> float:
    project = Path(tempfile.mkdtemp(prefix="flashfleet-noop-"))
    try:
        (project / "playbooks").mkdir()
        (project / "playbooks/noop.yml").write_text(NOOP)
        inventory = slab.inventory((stack, hosts))
        run_dir = lab.runs / label
        return measured(
            label, lab, hosts, keep,
            lambda: run_playbook("noop.yml", inventory, run_dir=run_dir, project_root=project),
        )[0]  # fmt: skip
    finally:
        shutil.rmtree(project, ignore_errors=True)


def site(
    lab: Lab,
    slab: ServeLab,
    stack: StackPlan,
    hosts: Sequence[str],
    keep: Path | None,
    *,
    which: str,
    run: int | None = None,
) -> dict[str, Any]:
    """One `site.yml` run, as the product's bring-up runs it."""
    inventory = slab.inventory((stack, hosts))
    extravars = _site_vars(lab)
    took, result, cpu = measured(
        f"site-{which}-{len(hosts)}" + ("" if run is None else f"-{run}"), lab, hosts, keep,
        lambda: slab.run("site.yml", inventory, extravars=extravars, token=lab.hub.token,
                         reconverge=which == "full"),
    )  # fmt: skip
    return {**run_figures(result, took), "cpu": cpu}


def run_figures(result: Any, took: float) -> dict[str, Any]:
    """A run's wall time, time to first token, phases, changed count and each server's own
    startup timings (load, JIT builds, ready), from its events."""
    events = read_events(result.events_log)
    servers = {
        f"{host}/{name}": {"load_s": t.load_s, "jit_s": t.jit_s, "ready_s": t.ready_s}
        for host, by_name in build_timeline(events).startup.items()
        for name, t in by_name.items()
    }
    return {
        "total": round(took, 2), "ttft": first_token_s(events), **phase_seconds(events),
        "changed": result.count("changed"), "servers": servers,
    }  # fmt: skip


LOAD_S, JIT_S = 2, 3  # the stand-in's load, and its JIT builds on a cold kernel cache


def _site_vars(lab: Lab) -> dict[str, Any]:
    return {
        **lab.repo_vars(), **SMALL_SIZES, **SMALL_MEMORY, **FAST_SERVE,
        "sglang_serve_docker": FAKE_DOCKER, "teardown_docker": FAKE_DOCKER,
    }  # fmt: skip


def bringup(
    lab: Lab, slab: ServeLab, stack: StackPlan, hosts: Sequence[str], keep: Path | None, *, which: str
) -> dict[str, Any]:
    """One whole bring-up on the hosts (site()), and what it asked of the stand-in Hub."""
    asked, files = len(lab.hub.requests), sum(len(lab.hub.file_gets(r)) for r in lab.hub.repos)
    out = site(lab, slab, stack, hosts, keep, which=which)
    return {
        **out,
        "hub_requests": len(lab.hub.requests) - asked,
        "hub_file_gets": sum(len(lab.hub.file_gets(r)) for r in lab.hub.repos) - files,
    }


def measure_after_down(keep: Path | None, nodes: int = 1) -> dict[str, Any]:
    """The first bring-up, `down` with the caches kept, and the second bring-up, side by side;
    with ``nodes`` > 1, one server across that many hosts (multi-node TP), each with its own
    kernel cache on its own cache volume."""
    need_mooncake_cache()
    hosts = [f"b{i + 1}" for i in range(nodes)]
    with open_lab([HostSpec(h, H200, NVIDIA_DEVICES) for h in hosts]) as lab:
        slab = prepare_hosts(lab, {"load_seconds": LOAD_S, "jit_seconds": JIT_S})
        stack = make_stack("again", "unified", [slab.address(h) for h in hosts])  # nodes.count: hosts
        first = bringup(lab, slab, stack, hosts, keep, which="first")
        down, _, _ = measured(
            "down", lab, hosts, keep,
            lambda: slab.run("teardown.yml", slab.inventory((stack, hosts)), extravars=_site_vars(lab)),
        )  # fmt: skip
        second = bringup(lab, slab, stack, hosts, keep, which="second")
    ttft = (first["ttft"], second["ttft"])
    return {
        "cores": os.cpu_count(),
        "nodes": nodes,
        "ttft_ratio": round(ttft[1] / ttft[0], 2) if None not in ttft and ttft[0] else None,
        "standin_load_s": LOAD_S,
        "standin_jit_s": JIT_S,
        "first": first,
        "down_s": round(down, 2),
        "second": second,
        "second_ratio": round(second["total"] / first["total"], 2),
        "saved_s": {k: round(first[k] - second[k], 2) for k in PHASES.values()},
    }


SERVE_TAGS = "mooncake,serve,verify"  # what tests/serve runs on the engine's hosts


def _serve_run(slab: ServeLab, playbook: str, inventory: dict[str, Any], tags: str | None) -> dict[str, Any]:
    started = time.monotonic()
    result = slab.run(playbook, inventory, tags=tags, extravars=FAST_SERVE)
    took = time.monotonic() - started
    if not result.ok:
        raise Failed(f"{playbook}: {slab.explain(result)}")
    return {**run_figures(result, took), "hub_requests": "-", "hub_file_gets": "-"}


def measure_after_down_engine(nodes: int, *, replicas: bool = False) -> dict[str, Any]:
    """--after-down on the real Docker engine's hosts (tests/serve's lab: the stand-in image runs
    in real containers, each kernel cache a folder on the host's cache volume): the serve and
    verify plays of site.yml (the hosts come prepared), `down` with the caches kept, the same
    again. One server across ``nodes`` hosts, or with ``replicas`` one replica a host behind the
    router (each prints its own start, so each node's JIT builds show)."""
    hosts = [f"k{i + 1}" for i in range(nodes)]
    with serve_lab(hosts) as slab:
        for host in hosts:
            slab.set_knobs(host, {"load_seconds": LOAD_S, "jit_seconds": JIT_S})
        addresses = [slab.address(h) for h in hosts]
        if replicas:
            cluster = {"replicas": nodes, "router": {"policy": "round_robin"}}
            stack = make_stack("again", "unified", addresses, strategy="high-throughput", cluster=cluster)
        else:
            stack = make_stack("again", "unified", addresses)
        inventory = slab.inventory((stack, hosts))
        first = _serve_run(slab, "site.yml", inventory, SERVE_TAGS)
        down = _serve_run(slab, "teardown.yml", inventory, None)
        second = _serve_run(slab, "site.yml", inventory, SERVE_TAGS)
    ttft = (first["ttft"], second["ttft"])
    return {
        "cores": os.cpu_count(),
        "nodes": nodes,
        "engine": True,
        "replicas": replicas,
        "ttft_ratio": round(ttft[1] / ttft[0], 2) if None not in ttft and ttft[0] else None,
        "standin_load_s": LOAD_S,
        "standin_jit_s": JIT_S,
        "first": first,
        "down_s": down["total"],
        "second": second,
        "second_ratio": round(second["total"] / first["total"], 2),
        "saved_s": {k: round(first[k] - second[k], 2) for k in PHASES.values()},
    }


def need_mooncake_cache() -> None:
    """Before any host boots: the hosts' distribution archive comes from 30-mooncake.sh."""
    if not (MOONCAKE_CACHE / ".ok").exists():
        raise Failed(f"{MOONCAKE_CACHE} missing: run scripts/setup.d/30-mooncake.sh")


def prepare_hosts(lab: Lab, knobs: dict[str, Any] | None = None) -> ServeLab:
    """What tests/e2e gives its hosts, plus the Mooncake packages as their distribution archive."""
    www = lab.repo.root / "mooncake"
    www.symlink_to(MOONCAKE_CACHE / "debs")  # served by the lab's own repository server
    # the recording fake docker (install_fake_docker) serves here, not the real engine: no image to tag
    slab = ServeLab(lab.pool, f"{lab.base_url}/mooncake", lab.runs, engine=False)
    for name, host in lab.pool.hosts.items():
        install_fake_docker(host.root)
        (host.root / "etc/flashfleet-test/standin.json").write_text(
            json.dumps({"load_seconds": 1, "image_mode": "pixels", **(knobs or {})})
        )
        slab.use_archive(name)
    return slab


def measure(keep: Path | None) -> dict[str, Any]:
    need_mooncake_cache()
    out: dict[str, Any] = {"cores": os.cpu_count()}
    runs: dict[str, dict[str, Any]] = {}
    noops: dict[int, float] = {}
    with open_lab([HostSpec(h, H200, NVIDIA_DEVICES) for h in ONE + FOUR]) as lab:
        slab = prepare_hosts(lab)
        for hosts in (ONE, FOUR):
            n = len(hosts)
            stack = make_stack(
                f"bench{n}", "unified", [slab.address(h) for h in hosts],
                options={"hicache": "l1l2l3", "hicache_size": 10},
                mooncake={"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 1},
            )  # fmt: skip
            runs[f"first{n}"] = site(lab, slab, stack, hosts, keep, which="first")
            # A no-op and a re-run take seconds on a shared machine, where one sample is noise:
            # they alternate, REPEATS times, and the medians are compared.
            samples: dict[str, list[Any]] = {"noop": [], "second": []}
            for i in range(REPEATS):
                samples["noop"].append(noop(lab, slab, stack, hosts, keep, label=f"noop-{n}-{i}"))
                samples["second"].append(site(lab, slab, stack, hosts, keep, which="second", run=i))
            noops[n] = statistics.median(samples["noop"])
            runs[f"second{n}"] = sorted(samples["second"], key=lambda r: r["total"])[REPEATS // 2]
            runs[f"second{n}"]["samples_s"] = [r["total"] for r in samples["second"]]
            runs[f"noop{n}"] = {"samples_s": [round(t, 2) for t in samples["noop"]]}
            runs[f"full{n}"] = site(lab, slab, stack, hosts, keep, which="full")
    out["noop_s"] = round(noops[1], 2)
    out["noop4_s"] = round(noops[4], 2)
    out["noop_samples_s"] = runs["noop1"]["samples_s"]
    out["noop4_samples_s"] = runs["noop4"]["samples_s"]
    out["second_samples_s"] = runs["second1"]["samples_s"]
    out["second4_samples_s"] = runs["second4"]["samples_s"]
    out["first_s"] = runs["first1"]
    out["second_s"] = runs["second1"]["total"]
    out["second_changed"] = runs["second1"]["changed"]
    out["second_detail"] = runs["second1"]
    out["rerun_ratio"] = round(out["second_s"] / out["noop_s"], 2)
    out["second_full_s"] = runs["full1"]["total"]
    out["full_rerun_ratio"] = round(out["second_full_s"] / out["noop_s"], 2)
    out["one_host_s"] = runs["first1"]["total"]
    out["four_hosts_s"] = runs["first4"]["total"]
    out["hosts4_ratio"] = round(out["four_hosts_s"] / out["one_host_s"], 2)
    out["four_hosts_first"] = runs["first4"]
    out["four_hosts_second"] = runs["second4"]
    out["four_hosts_full"] = runs["full4"]
    out["rerun4_ratio"] = round(runs["second4"]["total"] / out["noop4_s"], 2)
    out["rerun4_full_ratio"] = round(runs["full4"]["total"] / out["noop4_s"], 2)
    # what explains hosts4_ratio: the first converge's CPU seconds, 1 host vs 4
    first1, first4 = runs["first1"]["cpu"], runs["first4"]["cpu"]
    out["one_host_cpu_s"] = first1["hosts"]
    out["one_host_controller_cpu_s"] = first1["controller"]
    out["four_hosts_cpu_s"] = first4["hosts"]
    out["controller_cpu_s"] = first4["controller"]
    out["cpu_bound_ratio"] = first4["bound_ratio"]
    out["machine_busy_ratio"] = first4["machine_busy_ratio"]
    return out


def measure_at(rev: str, after_down: bool) -> dict[str, Any]:
    """The same measurement by the benchmark of revision `rev`, from a scratch git worktree."""
    scratch = Path(tempfile.mkdtemp(prefix="flashfleet-rev-"))
    tree = scratch / "tree"
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True)
    try:
        argv = [sys.executable, str(tree / "benchmarks/bringup.py"), "--format", "json"]
        argv += ["--after-down"] if after_down else []
        done = subprocess.run(argv, check=False, stdout=subprocess.PIPE)
        if done.returncode != 0:
            raise Failed(f"the benchmark at {rev} failed (exit {done.returncode})")
        return dict(json.loads(done.stdout))
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


SIDE_BY_SIDE = (
    "noop_s", "second_s", "rerun_ratio", "second_full_s", "full_rerun_ratio", "noop4_s",
    "rerun4_ratio", "rerun4_full_ratio", "one_host_s", "four_hosts_s",
)  # fmt: skip


def print_against(rev: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    print(f"cores {after['cores']}; {rev} measured first, then this tree")
    print(f"{'':<18} {rev[:12]:>12} {'this tree':>12}")
    for key in SIDE_BY_SIDE:
        print(f"{key:<18} {before.get(key, '-')!s:>12} {after.get(key, '-')!s:>12}")
    for key in ("second_samples_s", "noop_samples_s"):
        print(f"{key:<18} {before.get(key)} -> {after.get(key)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy every run's events.jsonl and its timeline PNG here"
    )
    parser.add_argument(
        "--after-down", action="store_true", help="first bring-up, `down` (caches kept), second bring-up"
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="--after-down on the real Docker engine's hosts: serve and verify plays (tests/serve's lab)",
    )
    parser.add_argument(
        "--replicas", action="store_true", help="--engine: one replica a host behind the router"
    )
    parser.add_argument(
        "--nodes", type=int, default=1, help="--after-down: hosts one server spans (multi-node TP)"
    )
    parser.add_argument(
        "--against", metavar="REV", help="also measure git revision REV first, and print both side by side"
    )
    args = parser.parse_args()
    try:
        before = measure_at(args.against, args.after_down) if args.against else None
        if args.after_down and args.engine:
            data = measure_after_down_engine(args.nodes, replicas=args.replicas)
        elif args.after_down:
            data = measure_after_down(args.keep, args.nodes)
        else:
            data = measure(args.keep)
    except Failed as err:
        print(f"bringup benchmark: {err}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(data if before is None else {"before": before, "after": data}, sort_keys=True))
        return 0
    if before is not None and not args.after_down:
        print_against(args.against, before, data)
        return 0
    if args.after_down:
        print(
            f"cores {data['cores']}; {data['nodes']} node(s); stand-in load {LOAD_S} s, JIT {JIT_S} s "
            "on a cold kernel cache"
        )
        print(f"{'':<16} {'first':>10} {'second':>10}")
        rows = ["ttft", "total", *PHASES.values(), "hub_requests", "hub_file_gets", "changed"]
        for key in rows:
            print(f"{key:<16} {data['first'][key]:>10} {data['second'][key]:>10}")
        for server, first in data["first"]["servers"].items():
            second = data["second"]["servers"].get(server, {})
            for key in ("load_s", "jit_s"):
                print(f"{server + ' ' + key:<16} {first[key]:>10} {second.get(key, '-'):>10}")
        print(f"second_ratio {data['second_ratio']} (down took {data['down_s']} s)")
        print(f"ttft_ratio {data['ttft_ratio']} (goal: 0.4 or less)")
        return 0
    print(f"cores {data['cores']}")
    keys = (
        "noop_s", "second_s", "rerun_ratio", "second_full_s", "full_rerun_ratio",
        "one_host_s", "four_hosts_s", "hosts4_ratio", "rerun4_ratio", "rerun4_full_ratio",
        "one_host_cpu_s", "four_hosts_cpu_s", "controller_cpu_s", "cpu_bound_ratio", "machine_busy_ratio",
    )  # fmt: skip
    for key in keys:
        print(f"{key:<18} {data[key]}")
    print("first_s", json.dumps(data["first_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
