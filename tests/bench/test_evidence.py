"""Badges earned by evidence (flashfleet.bench.evidence): a run that is valid, served tokens and
passed its stack's gate records what it proves; `plan` and `status` judge it against the stack
as it is now, and name what changed. The runs here are the driver's own (canned bench_serving
results through a fake runner), fingerprinted as the session does; the session writing it on a
real node is tests/bench/test_stack_cluster.py."""

from __future__ import annotations

import glob
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.bench.driver import run_profile
from flashfleet.bench.evidence import EVIDENCE, LATEST, badge_line, evidence_of, read_evidence, write_evidence
from flashfleet.bench.fingerprint import make_fingerprint, recipe_fingerprint
from flashfleet.bench.gate import evaluate
from flashfleet.bench.node_facts import from_bringup
from flashfleet.bench.profiles import get_profile
from flashfleet.bench.runner import Completed
from flashfleet.bench.session import gate_for
from flashfleet.bench.store import StoredRun, load_run, write_run
from flashfleet.cli import main
from flashfleet.planning import StackPlan, load_stack
from flashfleet.stack import DEFAULT_STACKS_DIR
from flashfleet.stack.lock import LockedFile, LockedRepo, StackLock, dump_lock
from tests.bench.fakes import FakeRunner, curve, jsonl, record

STACK = "h200-lowlat"
URL = "http://127.0.0.1:9"


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    folder = tmp_path / "stacks"
    folder.mkdir()
    shutil.copy(DEFAULT_STACKS_DIR / f"Pulumi.{STACK}.yaml", folder)
    edit(folder, bench={"thresholds": {"sweep": {"min_output_throughput": 50.0, "min_success_ratio": 1.0}}})
    return folder


def edit(stacks: Path, **changes: Any) -> None:
    path = stacks / f"Pulumi.{STACK}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"].update(changes)
    path.write_text(yaml.safe_dump(doc))


def measure(plan: StackPlan, results: Path, answer: Any = None) -> tuple[StoredRun, Any, Any]:
    """One sweep run at c=1,4, fingerprinted and gated as flashfleet.bench.session does it."""
    deployment = from_bringup(plan)
    profile = get_profile("sweep").with_overrides(concurrency=(1, 4))
    run = run_profile(profile, URL, FakeRunner(answer))
    thresholds = gate_for(profile, deployment)
    gate = None if thresholds.is_empty() else evaluate(thresholds, run.summaries)
    fingerprint = make_fingerprint(
        deployment, recipe=recipe_fingerprint(deployment.recipe) if deployment.recipe else None,
        profile="sweep", bench_argv=[lv.argv for lv in run.levels], endpoint=URL,
    )  # fmt: skip
    path = write_run(results, plan.stack, run, fingerprint=fingerprint, cost=None, gate=gate)
    return load_run(path), gate, thresholds


def test_a_passing_run_earns_the_stack_its_own_badge_until_something_changes(
    stacks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    plan = load_stack(STACK, stacks)
    assert badge_line(plan, results) == "no evidence"
    stored, gate, thresholds = measure(plan, results)
    evidence = evidence_of(stored, gate, thresholds)
    assert evidence is not None
    write_evidence(stored.path, evidence)
    # as a shell expands `flashfleet compare results/STACK/*`: the runs only
    assert glob.glob(str(results / STACK / "*")) == [str(stored.path)]
    assert json.loads((stored.path / EVIDENCE).read_text()) == json.loads(
        (results / STACK / LATEST).read_text()
    )
    assert read_evidence(results, STACK) == evidence
    assert (evidence.verdict, evidence.profile, evidence.hardware) == ("passed", "sweep", "h200")
    assert [lv.concurrency for lv in evidence.levels] == [1, 4]
    assert all(lv.output_tokens > 0 for lv in evidence.levels)
    run = stored.path.name
    date = f"{run[:4]}-{run[4:6]}-{run[6:8]}"
    assert badge_line(plan, results) == f"measured here: passed the sweep gate on {date}, run {run}"
    assert (
        main(["plan", STACK, "--stacks-dir", str(stacks), "--results", str(results), "--format", "json"]) == 0
    )
    assert (
        json.loads(capsys.readouterr().out)["evidence"]
        == f"measured here: passed the sweep gate on {date}, run {run}"
    )

    # the recipe changes: the evidence no longer speaks for the stack
    edit(stacks, options={"speculative": "dflash2"})
    stale = badge_line(load_stack(STACK, stacks), results)
    assert stale == f"evidence stale: the recipe not what run {run} ({date}) measured"
    edit(stacks, options={})
    assert badge_line(load_stack(STACK, stacks), results).startswith("measured here")
    # the gate changes
    edit(stacks, bench={"thresholds": {"sweep": {"min_output_throughput": 60.0, "min_success_ratio": 1.0}}})
    assert badge_line(load_stack(STACK, stacks), results).startswith("evidence stale: the gate not what run")
    edit(stacks, bench={"thresholds": {"sweep": {"min_output_throughput": 50.0, "min_success_ratio": 1.0}}})
    # a lock appears (the weights it measured were whatever main was): stale, and names the lock
    # and the recipe (the servers now load the locked commit: --revision)
    files = {"config.json": LockedFile(size=2, git_oid="0" * 40)}
    lock = StackLock(stack=STACK, locked_on="2026-12-04",
                     weights={"zai-org/GLM-5.3-Flash": LockedRepo(revision="main", commit="1" * 40, files=files)})  # fmt: skip
    (stacks / f"{STACK}.lock.yaml").write_text(dump_lock(lock))
    assert badge_line(load_stack(STACK, stacks), results).startswith("evidence stale: the lock not what run")


def test_no_run_that_proves_nothing_writes_evidence(stacks: Path, tmp_path: Path) -> None:
    plan = load_stack(STACK, stacks)
    results = tmp_path / "results"
    # failed requests: 3 of the level's prompts completed
    failed = measure(plan, results, lambda c: Completed(0, "", jsonl(curve(c, completed=3))))
    assert not failed[0].valid
    assert evidence_of(*failed) is None
    # no token served
    silent = measure(
        plan, results, lambda c: Completed(0, "", jsonl(record(c, throughput=0.0, ttft=1, tpot=1)))
    )
    assert evidence_of(*silent) is None
    # valid, but below its gate
    edit(stacks, bench={"thresholds": {"sweep": {"min_output_throughput": 1e9}}})
    below = measure(load_stack(STACK, stacks), results)
    assert below[0].valid
    assert below[1] is not None
    assert not below[1].passed
    assert evidence_of(*below) is None
    # valid, with no gate at all: nothing was asked of it, nothing is proven
    edit(stacks, bench={})
    ungated = measure(load_stack(STACK, stacks), results)
    assert ungated[1] is None
    assert evidence_of(*ungated) is None
    assert not list(results.rglob(EVIDENCE))
    assert not list(results.rglob(LATEST))


def test_an_unreadable_evidence_file_is_no_evidence(stacks: Path, tmp_path: Path) -> None:
    (tmp_path / "results" / STACK).mkdir(parents=True)
    (tmp_path / "results" / STACK / LATEST).write_text('{"verdict": "passed"}')
    assert badge_line(load_stack(STACK, stacks), tmp_path / "results") == "no evidence"


def test_matrix_shows_the_stacks_own_badge_under_the_cookbooks_on_its_cell(
    stacks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    file = str(stacks / f"Pulumi.{STACK}.yaml")
    plan = load_stack(STACK, stacks)
    stored, gate, thresholds = measure(plan, results)
    evidence = evidence_of(stored, gate, thresholds)
    assert evidence is not None
    write_evidence(stored.path, evidence)
    badge = f"measured here: passed the sweep gate on {evidence.date}, run {evidence.run}"
    assert main(["matrix", "--stack", file, "--results", str(results)]) == 0
    lines = capsys.readouterr().out.splitlines()
    cell = next(i for i, line in enumerate(lines) if line.startswith("h200 low-latency unified "))
    assert lines[cell].split("unified", 1)[1].strip() == "Final Verification In Progress"  # the cookbook's
    assert lines[cell + 1].strip() == f"{STACK}: {badge}"  # and the stack's own, under it
    assert sum(STACK in line for line in lines) == 1  # on its cell only
    assert main(["matrix", "--stack", file, "--results", str(results), "--format", "json"]) == 0
    cells = {(c["hardware"], c["strategy"], c["topology"]): c for c in json.loads(capsys.readouterr().out)}
    assert cells[("h200", "low-latency", "unified")]["stacks"] == {STACK: badge}
    assert cells[("h200", "high-throughput", "unified")]["stacks"] == {}
    # no results here: the stack has no badge of its own, and says so
    assert main(["matrix", "--stack", file, "--results", str(tmp_path / "none")]) == 0
    assert f"  {STACK}: no evidence" in capsys.readouterr().out
    # a stack that cannot be read: one line, exit 2
    assert main(["matrix", "--stack", "no-such-stack"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "[rule: unknown-stack]" in err
