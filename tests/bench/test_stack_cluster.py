"""The bench's stack cluster for real: bench.yml through ansible-runner on two booted systemd test
hosts (tests/hosts). The container boundary is a fake docker (tests/bench/node/docker) whose
`python3 -m sglang.benchmark.serving` is a client that streams real requests from the stand-in
server on node 0 and writes sglang 0.5.23's result line; nvidia-smi is the issue-6 stand-in.
The stack file, the inventory `configure` would have recorded and the CLI are the real ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bench.evidence import badge_line
from flashfleet.bench.node_runner import NodeRunner, bench_runs_root
from flashfleet.bench.runner import Invocation
from flashfleet.bringup import handoff
from flashfleet.bringup.project import REPO
from flashfleet.cli import bench as cli_bench
from flashfleet.cli import main
from flashfleet.cli.shared.stack_cluster import StackCluster
from flashfleet.inventory import build_inventory
from flashfleet.planning import load_stack
from flashfleet.stack.lock import LockedFile, LockedRepo, StackLock, dump_lock, read_lock
from tests.hosts.harness import LOGIN_USER, HostPool, HostSpec, host_pool

HERE = Path(__file__).parent
STACK = "benchseams"
HOSTS = ["bn0", "bn1"]
H200 = {"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "memory_mib": 143771}] * 8}
DRIVER = "595.58.03"
IMAGE = "flashfleet/sglang:v0.5.23-tf5.19.0"  # the derived image the stack's processes run
IMAGE_ID = "sha256:" + "5e" * 32
REPO_DIGEST = "lmsysorg/sglang@sha256:" + "a1" * 32
PACKAGES = {"sglang": "0.5.23", "transformers": "5.17.0", "tokenizers": "0.23.3", "torch": "2.9.1+cu130"}
SITE = "/opt/stand-in-image/site-packages"
CACHE_DIR = "/var/lib/flashfleet/hf"
MODEL = "zai-org/GLM-5.3-Flash"
COMMIT = "5e" * 20  # the stack's lock pins it, and the nodes hold it
PORT = 30000
TINY = """
[profiles.tiny]
description = "a few short requests"
backend = "sglang"
dataset = "random-ids"
concurrency = [1, 2]
min_prompts = 4
prompts_per_concurrency = 0
timeout_s = 120
[profiles.tiny.args]
random-input-len = 16
random-output-len = 8
"""
SERVE = f"""
import sys
sys.path.insert(0, "/opt/bench-standin")
from http.server import ThreadingHTTPServer
from standin_sglang import StandinState, _handler
ThreadingHTTPServer(("0.0.0.0", {PORT}), _handler(StandinState())).serve_forever()
"""


@dataclass
class Lab:
    pool: HostPool
    tmp: Path
    inventory: dict[str, Any]

    @property
    def runs(self) -> Path:
        return self.tmp / "runs"

    @property
    def stacks(self) -> Path:
        return self.tmp / "stacks"

    def cluster(self) -> StackCluster:
        return StackCluster(runs_root=self.runs, stacks_dir=self.stacks)

    def url(self) -> str:
        return f"http://{self.pool.hosts['bn0'].address}:{PORT}"

    def ssh(self, host: str, command: str) -> str:
        return self.pool.ssh(host, command, check=False).stdout

    def docker_runs(self, host: str) -> list[dict[str, Any]]:
        text = self.ssh(host, "cat /var/lib/fake-docker/runs.jsonl 2>/dev/null")
        return [json.loads(line) for line in text.splitlines()]


def _install(pool: HostPool, host: str) -> None:
    root = pool.hosts[host].root
    smi = (REPO / "tests/hosts/standin/nvidia-smi").read_text().replace("@VERSION@", DRIVER)
    for path, text in (("usr/bin/nvidia-smi", smi), ("usr/bin/docker", (HERE / "node/docker").read_text())):
        (root / path).write_text(text)
        (root / path).chmod(0o755)
    lib = root / "usr/local/lib/fake-docker"
    lib.mkdir(parents=True)
    for name in ("bench_client.py", "bench_serving_flags.json"):  # the client parses with the list
        (lib / name).write_text((HERE / "node" / name).read_text())
    image = {"Id": IMAGE_ID, "RepoTags": [IMAGE], "RepoDigests": [REPO_DIGEST], "site": SITE}
    (root / "etc/flashfleet-test/bench-image.json").write_text(json.dumps(image))
    for name, version in PACKAGES.items():  # what importlib.metadata reads (torchcodec: absent)
        info = root / SITE.lstrip("/") / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    # a cache the weights role filled: teardown deletes only a cache holding its marker; the
    # marker of the checkpoint names its snapshot, so the commit the node holds
    markers = root / CACHE_DIR.lstrip("/") / ".flashfleet-complete"
    markers.mkdir(parents=True)
    snapshot = f"{CACHE_DIR}/hub/models--{MODEL.replace('/', '--')}/snapshots/{COMMIT}"
    (markers / f"{MODEL.replace('/', '--')}@{COMMIT}").write_text(snapshot + "\n")


def _stack_file(stacks: Path, addresses: list[str]) -> None:
    hosts = [
        {"address": a, "sshUser": LOGIN_USER, "gpus": {"model": "h200", "count": 8}, "hostMemoryGib": 2048}
        for a in addresses
    ]
    spec = {
        "description": "bench seams test", "hardware": "h200", "strategy": "low-latency",
        "ttl": "8h", "image": {"version": "v0.5.23"}, "modelCacheDir": CACHE_DIR,
        "nodes": {"count": len(addresses), "source": {"kind": "existing", "hosts": hosts}},
        # min_output_throughput is out of reach of the stand-in: the stack's gate fails the run
        "bench": {"thresholds": {"tiny": {"min_success_ratio": 1.0, "min_output_throughput": 1e9}}},
        "teardown": {"keepCaches": False},
    }  # fmt: skip
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": {"flashfleet:stack": spec}}))
    files = {"config.json": LockedFile(size=2, git_oid="0" * 40)}
    lock = StackLock(
        stack=STACK,
        locked_on="2026-12-04",
        weights={MODEL: LockedRepo(revision="main", commit=COMMIT, files=files)},
    )
    (stacks / f"{STACK}.lock.yaml").write_text(dump_lock(lock))


def _record_configure_run(runs: Path, inventory: dict[str, Any]) -> None:
    """What `flashfleet configure STACK` leaves on this machine (flashfleet.bringup.handoff)."""
    run = runs / STACK / "20250101T000000Z-site"
    run.mkdir(parents=True)
    (run / "inventory.json").write_text(json.dumps(inventory))
    (run / "run.json").write_text(json.dumps({"playbook": "site.yml", "project": str(REPO)}))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("stack-cluster")
    with host_pool([HostSpec(h, H200) for h in HOSTS]) as pool:
        for host in HOSTS:
            _install(pool, host)
        standin = pool.hosts["bn0"].root / "opt/bench-standin"
        standin.mkdir(parents=True)
        (standin / "standin_sglang.py").write_text((HERE.parent / "serve/standin_sglang.py").read_text())
        (standin / "serve.py").write_text(SERVE)
        pool.ssh("bn0", "systemd-run --unit bench-standin /usr/bin/python3 /opt/bench-standin/serve.py")
        addresses = [pool.hosts[h].address for h in HOSTS]
        _stack_file(tmp / "stacks", addresses)
        bringup = load_stack(STACK, tmp / "stacks")
        inventory = build_inventory(bringup, addresses, addresses)
        for node, host in zip(bringup.nodes, HOSTS, strict=True):
            access = pool.inventory_host(host)
            # the login user is the stack's (sshUser), not the harness's choice
            assert inventory["all"]["hosts"][node.name]["ansible_user"] == access.pop("ansible_user")
            inventory["all"]["hosts"][node.name].update(access)
        _record_configure_run(tmp / "runs", inventory)
        yield Lab(pool, tmp, inventory)


def bench_cli(lab: Lab, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, Path]:
    monkeypatch.setattr(cli_bench, "stack_cluster", lambda _stacks: lab.cluster())
    (lab.tmp / "tiny.toml").write_text(TINY)
    results = lab.tmp / "results"
    before = {p for p in results.glob(f"{STACK}/*") if p.is_dir()}
    code = main(
        ["bench", STACK, "--profiles-file", str(lab.tmp / "tiny.toml"), "--profile", "tiny",
         "--endpoint", lab.url(), "--results", str(results), *extra]
    )  # fmt: skip
    (run_dir,) = {p for p in results.glob(f"{STACK}/*") if p.is_dir()} - before
    return code, run_dir


def test_bench_runs_on_node_zero_and_the_stack_gate_fails_it(lab: Lab, monkeypatch, capsys) -> None:
    code, run_dir = bench_cli(lab, monkeypatch)
    out = capsys.readouterr().out
    assert code == 1, out  # measured fine, but below the stack's throughput floor
    assert "FAIL min_output_throughput" in out
    assert "PASS min_success_ratio" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ok"]
    assert [lv["completed"] for lv in summary["levels"]] == [4, 4]
    assert not (run_dir / "evidence.json").exists()  # below its gate: no badge

    every = [r for r in lab.docker_runs("bn0") if "sglang.benchmark.serving" in r["cmd"]]
    # per level a warm-up run of its own seed, then the measured run, all on node 0
    runs = [r for r in every if r["cmd"][r["cmd"].index("--output-file") + 1] == "/results/bench.jsonl"]
    assert len(every) == 4
    assert len(runs) == 2
    seeds = {r["cmd"][r["cmd"].index("--seed") + 1] for r in every}
    assert len(seeds) == 4  # no run re-sends another's prompts
    assert all("sglang.benchmark.serving" not in r["cmd"] for r in lab.docker_runs("bn1"))
    argv = runs[0]["argv"]
    assert argv[1:3] == ["run", "--rm"]
    assert argv[argv.index("--network") + 1] == "host"
    assert argv[argv.index("--volume") + 1].endswith(":/results")
    assert runs[0]["image"] == IMAGE
    cmd = runs[0]["cmd"]
    assert cmd[cmd.index("--output-file") + 1] == "/results/bench.jsonl"
    assert cmd[cmd.index("--base-url") + 1] == f"http://127.0.0.1:{PORT}"  # node 0's own address
    for level in (1, 2):
        line = json.loads((run_dir / f"raw/c{level:04d}.jsonl").read_text())
        assert line["max_concurrency"] == level
        assert line["completed"] == 4
        assert line["total_output_tokens"] == 4 * 8  # tokens that really streamed from the stand-in
        assert "Serving Benchmark Result" in (run_dir / f"raw/c{level:04d}.log").read_text()
    assert lab.ssh("bn0", "ls /var/lib/flashfleet/bench").strip() == ""  # results dirs removed


def test_the_fingerprint_holds_what_the_nodes_run(lab: Lab, monkeypatch, capsys) -> None:
    _, run_dir = bench_cli(lab, monkeypatch)
    fp = json.loads((run_dir / "fingerprint.json").read_text())
    assert fp["image"] == IMAGE
    assert fp["image_digest"] == IMAGE_ID
    assert fp["image_repo_digests"] == [REPO_DIGEST]
    assert fp["node_count"] == 2
    assert fp["instance_type"] is None
    assert fp["recipe"]["strategy"] == "low-latency"
    assert fp["recipe"]["badge"]
    assert len(fp["recipe"]["processes"]) == 2
    assert set(fp["node_versions"]) == {f"{STACK}-node-0", f"{STACK}-node-1"}
    for versions in fp["node_versions"].values():
        assert versions == {"nvidia_driver": DRIVER, "image_id": IMAGE_ID, **PACKAGES}
    # which bytes of the checkpoint were served: the lock's commit, and what each node holds
    lock = read_lock(lab.stacks / f"{STACK}.lock.yaml")
    assert lock is not None
    assert fp["weights"] == {
        "lock_digest": lock.digest,
        "locked": {MODEL: COMMIT},
        "on_nodes": {f"{STACK}-node-{i}": {MODEL: COMMIT} for i in (0, 1)},
    }
    assert fp["notes"] == []


def test_a_threshold_on_the_command_line_overrides_the_stacks(lab: Lab, monkeypatch, capsys) -> None:
    code, run_dir = bench_cli(lab, monkeypatch, "--threshold", "min_output_throughput=1")
    assert code == 0, capsys.readouterr().out
    checks = json.loads((run_dir / "summary.json").read_text())["gate"]["checks"]
    limits = {(c["threshold"], c["limit"]) for c in checks}
    assert limits == {("min_output_throughput", 1.0), ("min_success_ratio", 1.0)}
    # a valid run that passed its gate records its evidence, with what the nodes said
    evidence = json.loads((run_dir / "evidence.json").read_text())
    assert (evidence["verdict"], evidence["run"], evidence["profile"]) == ("passed", run_dir.name, "tiny")
    assert evidence["thresholds"] == {"min_output_throughput": 1.0, "min_success_ratio": 1.0}
    assert [lv["output_tokens"] for lv in evidence["levels"]] == [4 * 8, 4 * 8]
    assert evidence["nodes"][f"{STACK}-node-0"]["nvidia_driver"] == DRIVER
    assert evidence["image_digest"] == IMAGE_ID
    assert (run_dir.parent / ".evidence.json").read_text() == (run_dir / "evidence.json").read_text()
    # it passed the command line's floor, not the stack's own gate: not this stack's badge
    plan = load_stack(STACK, lab.stacks)
    badge = badge_line(plan, lab.tmp / "results")
    assert badge.startswith(f"evidence stale: the gate not what run {run_dir.name}"), badge


def test_a_run_past_its_timeout_is_stopped_and_its_container_removed(lab: Lab) -> None:
    runner = NodeRunner(STACK, lab.inventory, bench_runs_root(lab.runs))
    argv = ("python3", "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", lab.url(),
            "--num-prompts", "1", "--max-concurrency", "1", "--random-output-len", "20000",
            "--output-file", "bench.jsonl")  # fmt: skip
    done = runner(Invocation(argv=argv, output_name="bench.jsonl", timeout_s=3))
    assert done.timed_out
    assert done.jsonl == ""
    assert done.runner_error is None
    assert "bench_client" not in lab.ssh("bn0", "ps -eo args ww")
    assert lab.ssh("bn0", "ls /var/lib/fake-docker/containers").strip() == ""


def test_check_mode_reads_facts_and_runs_no_benchmark(lab: Lab) -> None:
    before = len(lab.docker_runs("bn0"))
    result = handoff.run_recorded(
        "bench.yml", lab.inventory, runs_root=bench_runs_root(lab.runs), stack=STACK, check=True,
        extravars={"bench_argv": ["python3", "-m", "sglang.benchmark.serving"], "bench_fetch_dir": "/nonexistent"},
    )  # fmt: skip
    assert result.ok, result.summary()
    assert result.count("changed") == 0
    cmds = [r["cmd"] for r in lab.docker_runs("bn0")[before:]]
    assert cmds
    assert all("sglang.benchmark.serving" not in c for c in cmds)
    assert "would run in " + IMAGE in result.events_log.read_text()


def test_teardown_keeps_the_weight_cache_unless_the_stack_says(lab: Lab) -> None:
    hosts = lab.inventory["all"]["hosts"]
    assert {h["flashfleet_keep_caches"] for h in hosts.values()} == {False}
    keep = json.loads(json.dumps(lab.inventory))
    for hvars in keep["all"]["hosts"].values():
        del hvars["flashfleet_keep_caches"]  # a stack without a teardown section
    handoff.teardown(keep, runs_root=lab.runs, stack=STACK, emit=None)
    assert lab.ssh("bn1", f"test -d {CACHE_DIR} && echo kept").strip() == "kept"
    handoff.teardown(lab.inventory, runs_root=lab.runs, stack=STACK, emit=None)
    for host in HOSTS:
        assert lab.ssh(host, f"test -e {CACHE_DIR} || echo gone").strip() == "gone"
