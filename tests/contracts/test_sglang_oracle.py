"""Contract: every enabled render parses with the real sglang 0.5.23 argument parser.

The oracle is a separate virtual environment (scripts/setup.d/10-sglang-oracle.sh) holding
sglang 0.5.23 and sglang-router 0.3.2; the parsing happens there in one subprocess.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from flashfleet.catalog import hardware_catalog
from flashfleet.recipes import OPTION_DEFS, STRATEGIES, TOPOLOGIES, RecipeError, render

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
PARSE = Path(__file__).with_name("oracle_parse.py")

# Values tried for the options that take numbers or words (besides each choice of the others).
SAMPLES: dict[str, list[object]] = {
    "tp": [2],
    "hicache_size": [64],
    "mamba_full_memory_ratio": [1.8],
    "max_mamba_cache_size": [256],
    "max_running_requests": [32],
    "nodes": [2],
    "pd_decode_tp": [2],
    "checkpoint": ["nvidia/GLM-5.3-Flash-NVFP4"],
    "extra_args": [["--enable-metrics", "--watchdog-timeout", "1200"]],
}


def enabled_renders():
    """Every cell with default options, and with each single-option override that renders."""
    cases = {}
    for hw in hardware_catalog():
        for strategy in STRATEGIES:
            for topology in TOPOLOGIES:
                variants: list[dict[str, object]] = [{}]
                for name, definition in OPTION_DEFS.items():
                    values = list(definition.choices) or SAMPLES.get(name, [])
                    variants += [{name: v} for v in values]
                for overrides in variants:
                    try:
                        recipe = render(hw, strategy, topology, overrides)
                    except RecipeError:
                        continue
                    for proc in recipe.processes:
                        key = (
                            f"{hw}/{strategy}/{topology}/{json.dumps(overrides, sort_keys=True)}/{proc.name}"
                        )
                        cases[key] = {
                            "kind": "router" if proc.role == "router" else "server",
                            "argv": list(proc.argv),
                        }
    return cases


def oracle(cases: dict[str, dict[str, object]]) -> dict[str, str | None]:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    done = subprocess.run(
        [str(ORACLE), str(PARSE)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode:
        pytest.fail(f"the oracle failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def test_every_enabled_render_parses_with_real_sglang():
    cases = enabled_renders()
    assert len(cases) > 300  # the matrix and its single-option overrides
    kinds = {c["kind"] for c in cases.values()}
    assert kinds == {"server", "router"}
    failures = {k: v for k, v in oracle(cases).items() if v is not None}
    assert failures == {}


def test_oracle_rejects_a_bad_flag_and_a_bad_value():
    good = render("gb300", "low-latency").processes[0].argv
    cases = {
        "bad-flag": {"kind": "server", "argv": [*good, "--no-such-flag"]},
        "bad-choice": {"kind": "server", "argv": [*good[:-2], "--kv-cache-dtype", "fp9", *good[-2:]]},
        "bad-router": {
            "kind": "router",
            "argv": ["python", "-m", "sglang_router.launch_router", "--prefill-only"],
        },
        "good": {"kind": "server", "argv": list(good)},
    }
    result = oracle(cases)
    assert "--no-such-flag" in result["bad-flag"]
    assert "fp9" in result["bad-choice"]
    assert result["bad-router"]
    assert result["good"] is None
