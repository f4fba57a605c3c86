"""Badges earned by evidence: what a benchmark run that passed its stack's gate proves.

The cookbook's badge is the cookbook's word. A stack's own badge comes from a run of its own:
when `flashfleet bench` measured a valid run (tokens served, no failed request, no PD fallback:
flashfleet.bench.validity) and the run passed a gate, the run directory gets `evidence.json`,
and `results/STACK/.evidence.json` is the latest one. It holds what the run proves, and the
hashes of what it was measured on: the recipe as rendered (argv, badge), the gate's thresholds,
the stack's lock and the image. `plan` and `status` compare those with the stack as it is now:
"measured here: passed ..." while they agree, "evidence stale: <what changed>" once any differs,
"no evidence" without a record. Nothing but such a run writes one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from flashfleet.bench.gate import GateResult
    from flashfleet.bench.store import StoredRun
    from flashfleet.planning import StackPlan
    from flashfleet.stack.thresholds import Thresholds

EVIDENCE = "evidence.json"
# results/STACK/.evidence.json: the latest; hidden, so `results/STACK/*` still lists runs only
LATEST = ".evidence.json"
_STRICT = ConfigDict(extra="forbid", frozen=True)


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class EvidenceLevel(BaseModel):
    model_config = _STRICT

    concurrency: int | None
    completed: int
    output_tokens: int
    output_throughput: float
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None


class MeasuredOn(BaseModel):
    """The hashes of what the run was measured on; any one that changes makes the evidence stale."""

    model_config = _STRICT

    recipe: str  # the recipe fingerprint (argv of every process, badge): flashfleet.bench.fingerprint
    lock: str | None  # the stack's lock (flashfleet.stack.lock); None: none
    image: str | None  # the image reference the nodes ran


class Evidence(BaseModel):
    model_config = _STRICT

    stack: str
    run: str  # the run's id: its directory name under results/STACK/
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    profile: str
    verdict: Literal["passed"]
    thresholds: dict[str, float]
    measured_on: MeasuredOn
    image_digest: str | None
    hardware: str | None
    nodes: dict[str, dict[str, str]]  # node -> driver and package versions, as the nodes said
    levels: list[EvidenceLevel]


def measured_on(recipe: dict[str, Any] | None, lock: str | None, image: str | None) -> MeasuredOn:
    return MeasuredOn(recipe=digest(recipe or {}), lock=lock, image=image)


def evidence_of(run: StoredRun, gate: GateResult | None, thresholds: Thresholds) -> Evidence | None:
    """The run's evidence, or None: a run that is not valid, served no token, or passed no gate
    proves nothing."""
    levels = run.levels
    if not run.valid or gate is None or not gate.passed or thresholds.is_empty():
        return None
    if not levels or any(lv.completed == 0 or lv.total_output_tokens == 0 for lv in levels):
        return None
    fp = run.fingerprint
    weights = fp.get("weights") or {}
    return Evidence(
        stack=str(run.summary["stack"]),
        run=run.path.name,
        date=_date(run.path.name),
        profile=str(run.summary["profile"]["name"]),
        verdict="passed",
        thresholds={k: float(v) for k, v in thresholds.model_dump(exclude_none=True).items()},
        measured_on=measured_on(fp.get("recipe"), weights.get("lock_digest"), fp.get("image")),
        image_digest=fp.get("image_digest"),
        hardware=(fp.get("recipe") or {}).get("hardware"),
        nodes={
            str(n): {k: str(v) for k, v in vs.items()} for n, vs in (fp.get("node_versions") or {}).items()
        },
        levels=[
            EvidenceLevel(
                concurrency=lv.concurrency,
                completed=lv.completed,
                output_tokens=lv.total_output_tokens,
                output_throughput=lv.output_throughput,
                ttft_p99_ms=lv.ttft_ms.p99,
                tpot_p99_ms=lv.tpot_ms.p99,
            )
            for lv in levels
        ],
    )


def _date(run_id: str) -> str:
    """YYYY-MM-DD of a run directory named YYYYMMDDTHHMMSSZ (flashfleet.bench.store.run_dir)."""
    return f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}"


def write_evidence(run_dir: Path, evidence: Evidence) -> Path:
    """In the run directory, and as the stack's latest (results/STACK/.evidence.json)."""
    text = evidence.model_dump_json(indent=2) + "\n"
    (run_dir / EVIDENCE).write_text(text)
    latest = run_dir.parent / LATEST
    latest.write_text(text)
    return latest


def read_evidence(results_root: Path, stack: str) -> Evidence | None:
    path = results_root / stack / LATEST
    if not path.is_file():
        return None
    try:
        return Evidence.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError):
        return None  # unreadable: no evidence, never a badge


def current_measured_on(plan: StackPlan) -> MeasuredOn:
    """What the stack would be measured on now, by the bench's own rules (recipe, lock, image)."""
    from flashfleet.bench.fingerprint import recipe_fingerprint
    from flashfleet.bench.node_facts import from_bringup

    deployment = from_bringup(plan)
    recipe = recipe_fingerprint(deployment.recipe) if deployment.recipe else None
    return measured_on(recipe, plan.lock.digest if plan.lock else None, deployment.image)


_WHAT = {"recipe": "the recipe", "lock": "the lock", "image": "the image"}


def badge_line(plan: StackPlan, results_root: Path) -> str:
    """This stack's own badge, from its latest evidence: stale when what it was measured on
    differs now, or when the stack's gate for the profile asks what the run was not held to."""
    evidence = read_evidence(results_root, plan.stack)
    if evidence is None:
        return "no evidence"
    now, then = current_measured_on(plan).model_dump(), evidence.measured_on.model_dump()
    changed = [_WHAT[k] for k, v in now.items() if then[k] != v]
    stack_gate = plan.spec.bench.thresholds.get(evidence.profile)
    asked = stack_gate.model_dump(exclude_none=True) if stack_gate is not None else {}
    if any(evidence.thresholds.get(name) != float(limit) for name, limit in asked.items()):
        changed.append("the gate")
    if changed:
        return f"evidence stale: {', '.join(changed)} not what run {evidence.run} ({evidence.date}) measured"
    return f"measured here: passed the {evidence.profile} gate on {evidence.date}, run {evidence.run}"
