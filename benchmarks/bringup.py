"""Bring-up time on the systemd test hosts: Ansible's floor, first and second converge, 1 vs 4 hosts.

Prints figures and ratios measured side by side in one run; asserts nothing (speed targets live
here, not in tests). Needs root and the test-host cache (scripts/setup.d/20-test-hosts.sh,
30-mooncake.sh), like tests/roles and tests/serve, whose stand-ins it uses:

- prepare roles: playbooks/prepare.yml on H200-like hosts (local apt repository, stand-in Hub);
- mooncake, serve, verify: site.yml with those tags on hosts whose docker is the recording fake
  that starts an OpenAI-compatible stand-in (a unified H200 stack with a Mooncake L3 tier).

Usage: uv run python benchmarks/bringup.py [--format json] [--keep DIR]
Goals (issue 17): rerun_ratio = second_s / noop_s <= 1.3; hosts4_ratio = four_hosts_s / one_host_s <= 1.3.
The second converge takes the product's path (converge records: unchanged roles are skipped);
`second_full_s` re-runs every role (configure --reconverge), Ansible's idempotence alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

from hosts.harness import HostSpec  # noqa: E402
from roles.conftest import Lab, open_lab  # noqa: E402
from roles.hardware import H200, NVIDIA_DEVICES, facts  # noqa: E402
from serve.lab import ServeLab, install_fake_docker, make_stack, serve_lab  # noqa: E402

from flashfleet.bringup.playbook_run import RunResult, run_playbook  # noqa: E402
from flashfleet.bringup.timeline import build_timeline, read_events  # noqa: E402

ONE, FOUR = ["b1"], ["q0", "q1", "q2", "q3"]
SITE_TAGS = "mooncake,serve,verify"
SITE_PHASES = {"mooncake": "mooncake", "serve": "sglang_serve", "verify": "verify"}
SMALL_SIZES = {"preflight_image_gb": 1, "preflight_weights_gb": 1, "preflight_disk_margin_gb": 1}
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


class Failed(RuntimeError):
    pass


def timed(label: str, keep: Path | None, run: Callable[[], RunResult]) -> tuple[float, RunResult]:
    start = time.perf_counter()
    result = run()
    took = time.perf_counter() - start
    if not result.ok:
        raise Failed(f"{label}: {result.summary()}")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(result.events_log, keep / f"{label}.events.jsonl")
    print(f"  {label}: {took:.1f} s, changed={result.count('changed')}", file=sys.stderr)
    return took, result


def phase_seconds(result: RunResult, roles: dict[str, str]) -> dict[str, float]:
    """Per phase: from its first task's start to its last task's end on any host."""
    spans = build_timeline(read_events(result.events_log)).spans
    out = {}
    for name, role in roles.items():
        mine = [s for s in spans if s.phase == role]
        out[name] = round(max(s.end for s in mine) - min(s.start for s in mine), 2) if mine else 0.0
    return out


def noop(lab: Lab, hosts: Sequence[str], keep: Path | None, label: str) -> float:
    project = Path(tempfile.mkdtemp(prefix="flashfleet-noop-"))
    try:
        (project / "playbooks").mkdir()
        (project / "playbooks/noop.yml").write_text(NOOP)
        inventory = lab.inventory({h: facts("h200") for h in hosts})
        run_dir = lab.runs / label
        return timed(
            label, keep, lambda: run_playbook("noop.yml", inventory, run_dir=run_dir, project_root=project)
        )[0]
    finally:
        shutil.rmtree(project, ignore_errors=True)


def prepare(
    lab: Lab, hosts: Sequence[str], keep: Path | None, label: str, reconverge: bool = False
) -> tuple[float, int]:
    inventory = lab.inventory({h: facts("h200") for h in hosts})
    extravars = {**lab.repo_vars(), **SMALL_SIZES}
    took, result = timed(
        label,
        keep,
        lambda: run_playbook(
            "prepare.yml",
            inventory,
            run_dir=lab.runs / label,
            extravars=extravars,
            hf_token=lab.hub.token,
            reconverge=reconverge,
        ),
    )
    return took, result.count("changed")


def site(
    lab: ServeLab, hosts: Sequence[str], keep: Path | None, label: str, reconverge: bool = False
) -> tuple[float, dict[str, float], int]:
    stack = make_stack(
        f"bench{len(hosts)}", "unified", [lab.address(h) for h in hosts],
        options={"hicache": "l1l2l3", "hicache_size": 10},
        mooncake={"masterNode": 0, "protocol": "tcp", "globalSegmentGib": 1},
    )  # fmt: skip
    inventory = lab.inventory((stack, hosts))
    took, result = timed(
        label,
        keep,
        lambda: lab.run("site.yml", inventory, tags=SITE_TAGS, extravars=FAST_SERVE, reconverge=reconverge),
    )
    return took, phase_seconds(result, SITE_PHASES), result.count("changed")


def converge(
    prep: float, site_s: float, phases: dict[str, float], changed: int, prep_changed: int
) -> dict[str, Any]:
    return {
        "total": round(prep + site_s, 2),
        "prepare": round(prep, 2),
        "site": round(site_s, 2),
        **phases,
        "changed": prep_changed + changed,
    }


def measure(keep: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"cores": os.cpu_count()}
    specs = [HostSpec(h, H200, NVIDIA_DEVICES) for h in ONE + FOUR]
    prep: dict[str, tuple[float, int]] = {}
    with open_lab(specs) as lab:
        out["noop_s"] = round(noop(lab, ONE, keep, "noop-1"), 2)
        out["noop4_s"] = round(noop(lab, FOUR, keep, "noop-4"), 2)
        for n, hosts in (("1", ONE), ("4", FOUR)):
            prep[f"first{n}"] = prepare(lab, hosts, keep, f"prepare-first-{n}")
            prep[f"second{n}"] = prepare(lab, hosts, keep, f"prepare-second-{n}")
            # every role again (configure --reconverge): Ansible's own idempotence, for comparison
            prep[f"full{n}"] = prepare(lab, hosts, keep, f"prepare-full-{n}", reconverge=True)
    site_names = ["s1", "r0", "r1", "r2", "r3"]
    with serve_lab(site_names) as slab:
        for host in site_names:
            install_fake_docker(slab, host)
            (slab.pool.hosts[host].root / "etc/flashfleet-test/standin.json").write_text(
                json.dumps({"load_seconds": 1, "image_mode": "pixels"})
            )
        runs: dict[str, dict[str, Any]] = {}
        for n, hosts in (("1", site_names[:1]), ("4", site_names[1:])):
            for which in ("first", "second", "full"):
                took, phases, changed = site(slab, hosts, keep, f"site-{which}-{n}", which == "full")
                p_took, p_changed = prep[f"{which}{n}"]
                runs[f"{which}{n}"] = converge(p_took, took, phases, changed, p_changed)
    out["first_s"] = runs["first1"]
    out["second_s"] = runs["second1"]["total"]
    out["second_changed"] = runs["second1"]["changed"]
    out["second_detail"] = runs["second1"]
    out["rerun_ratio"] = round(out["second_s"] / out["noop_s"], 2)
    runs_per = 2  # prepare.yml, then site.yml --tags mooncake,serve,verify (the labs differ)
    # the product runs site.yml once: per playbook run, a re-run against one no-op run
    out["rerun_ratio_per_run"] = round(out["second_s"] / (runs_per * out["noop_s"]), 2)
    out["second_full_s"] = runs["full1"]["total"]
    out["full_rerun_ratio"] = round(out["second_full_s"] / out["noop_s"], 2)
    out["one_host_s"] = runs["first1"]["total"]
    out["four_hosts_s"] = runs["first4"]["total"]
    out["hosts4_ratio"] = round(out["four_hosts_s"] / out["one_host_s"], 2)
    out["four_hosts_first"] = runs["first4"]
    out["four_hosts_second"] = runs["second4"]
    out["rerun4_ratio"] = round(runs["second4"]["total"] / out["noop4_s"], 2)
    out["rerun4_full_ratio"] = round(runs["full4"]["total"] / out["noop4_s"], 2)
    out["playbook_runs_per_converge"] = runs_per
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--keep", type=Path, default=None, help="copy every run's events.jsonl here")
    args = parser.parse_args()
    try:
        data = measure(args.keep)
    except Failed as err:
        print(f"bringup benchmark: {err}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(data, sort_keys=True))
        return 0
    print(f"cores {data['cores']}")
    keys = (
        "noop_s", "second_s", "rerun_ratio", "rerun_ratio_per_run", "second_full_s", "full_rerun_ratio",
        "one_host_s", "four_hosts_s", "hosts4_ratio", "rerun4_ratio", "rerun4_full_ratio",
    )  # fmt: skip
    for key in keys:
        print(f"{key:<14} {data[key]}")
    print("first_s", json.dumps(data["first_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
