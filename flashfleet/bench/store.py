"""results/STACK/TIMESTAMP/: raw output, summary, fingerprint, report and plots of one run.

raw/c0064.jsonl   bench_serving's JSONL, as written
raw/c0064.log     its console output
raw/c0064.argv.json
raw/c0064.warmup.argv.json   a cold level's warm-up run (its own seed)
summary.json      per-level metrics, cost, gate, failures
fingerprint.json  what was measured (recipe argv, badge, image digest, versions, hardware)
report.md, throughput_latency.png, latency_percentiles.png
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flashfleet.bench.cost import Cost, level_cost_per_mtok
from flashfleet.bench.driver import BenchRun
from flashfleet.bench.gate import GateResult
from flashfleet.bench.servers import Server
from flashfleet.bench.summary import LevelSummary

SUMMARY = "summary.json"
FINGERPRINT = "fingerprint.json"
REPORT = "report.md"


def timestamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


def run_dir(results_root: Path, stack: str, started_at: datetime) -> Path:
    base = results_root / stack / timestamp(started_at)
    path, n = base, 1
    while path.exists():  # two runs in the same second keep both
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def verdict(run: BenchRun) -> tuple[bool, list[str]]:
    """Whether the run is a measurement, and every reason it is not."""
    reasons = [*run.problems]
    reasons += [f"concurrency {f.concurrency}: {f.error}" for f in run.failures]
    if not run.levels and not run.problems:
        reasons.append("no level ran")
    return not reasons, reasons


def summary_dict(
    stack: str,
    run: BenchRun,
    cost: Cost | None,
    gate: GateResult | None,
    *,
    gpus: int | None = None,
    servers: Sequence[Server] = (),
    worker_shares: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    hourly = cost.hourly_usd if cost else None
    levels = []
    for lv in run.summaries:
        row = lv.model_dump()
        row["cost_per_mtok_output_usd"] = level_cost_per_mtok(hourly, lv) if hourly is not None else None
        row["output_throughput_per_gpu"] = lv.output_throughput / gpus if gpus else None
        # the servers' own counters over this level's measured requests
        row["server"] = run.server_counters.get(lv.concurrency) if lv.concurrency is not None else None
        levels.append(row)
    valid, reasons = verdict(run)
    return {
        "valid": valid,
        "verdict": reasons,
        "stack": stack,
        "profile": {"name": run.profile.name, "description": run.profile.description},
        "endpoint": run.endpoint,
        "started_at": run.started_at.isoformat().replace("+00:00", "Z"),
        "run_id": run.run_id or None,
        "ready_wait_s": run.ready_wait_s,
        "wall_s": run.wall_s,
        "ok": run.ok,
        "failures": [
            {"concurrency": f.concurrency, "error": f.error, "log_tail": f.log_tail} for f in run.failures
        ],
        "problems": list(run.problems),
        "warnings": list(run.warnings),
        "gpus": gpus,
        "servers": [{"role": sv.role, "url": sv.url, "dp_ranks": sv.dp_ranks} for sv in servers],
        "worker_shares": dict(worker_shares or {}),
        "levels": levels,
        "cost": cost.model_dump() if cost else None,
        "gate": gate.model_dump() if gate else None,
    }


def write_run(
    results_root: Path,
    stack: str,
    run: BenchRun,
    *,
    fingerprint: dict[str, Any],
    cost: Cost | None,
    gate: GateResult | None,
    gpus: int | None = None,
    servers: Sequence[Server] = (),
    worker_shares: Mapping[str, Any] | None = None,
) -> Path:
    out = run_dir(results_root, stack, run.started_at)
    raw = out / "raw"
    raw.mkdir(parents=True)
    for lv in run.levels:
        stem = f"c{lv.concurrency:04d}"
        (raw / f"{stem}.jsonl").write_text(lv.completed.jsonl)
        note = f"\n[flashfleet] {lv.completed.runner_error}\n" if lv.completed.runner_error else ""
        (raw / f"{stem}.log").write_text(lv.completed.log + note)
        (raw / f"{stem}.argv.json").write_text(json.dumps(list(lv.argv), indent=2) + "\n")
        if lv.warmup_argv is not None:
            (raw / f"{stem}.warmup.argv.json").write_text(json.dumps(list(lv.warmup_argv), indent=2) + "\n")
    summary = summary_dict(stack, run, cost, gate, gpus=gpus, servers=servers, worker_shares=worker_shares)
    _write_json(out / SUMMARY, summary)
    _write_json(out / FINGERPRINT, fingerprint)
    return out


def _write_json(path: Path, data: Any) -> None:
    # allow_nan=False: a NaN that slipped through would make the file unreadable elsewhere
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


@dataclass(frozen=True)
class StoredRun:
    path: Path
    summary: dict[str, Any]
    fingerprint: dict[str, Any]

    @property
    def levels(self) -> list[LevelSummary]:
        keep = set(LevelSummary.model_fields)  # not the derived success_ratio, nor the costs
        return [
            LevelSummary.model_validate({k: v for k, v in row.items() if k in keep})
            for row in self.summary["levels"]
        ]

    @property
    def label(self) -> str:
        recipe = self.fingerprint.get("recipe") or {}
        what = " ".join(str(recipe[k]) for k in ("hardware", "strategy", "topology") if recipe.get(k))
        where = f"{self.summary['stack']}/{self.path.name}"
        return f"{what} ({where})" if what else where

    @property
    def valid(self) -> bool:
        """A run stored before validity was recorded counts by its old `ok`."""
        return bool(self.summary.get("valid", self.summary.get("ok")))

    @property
    def method(self) -> dict[str, Any] | None:
        return self.fingerprint.get("method")

    @property
    def gpus(self) -> int | None:
        return self.summary.get("gpus") or self.fingerprint.get("gpus")

    def level_costs(self) -> dict[int | None, float | None]:
        return {row["concurrency"]: row.get("cost_per_mtok_output_usd") for row in self.summary["levels"]}


def load_run(path: Path) -> StoredRun:
    summary_path, fp_path = path / SUMMARY, path / FINGERPRINT
    if not summary_path.is_file():
        raise FileNotFoundError(f"{path}: no {SUMMARY} (not a flashfleet benchmark run)")
    fingerprint = json.loads(fp_path.read_text()) if fp_path.is_file() else {}
    return StoredRun(path, json.loads(summary_path.read_text()), fingerprint)
