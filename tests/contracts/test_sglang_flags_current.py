"""Contract: the flag list shipped as data (what `--extra-args` flags are checked against,
offline) is exactly what the pinned sglang's own parser accepts. Regenerate it with
`.venv-oracle/bin/python scripts/sglang_flags.py`."""

import os
import subprocess
from pathlib import Path

import pytest

from flashfleet.recipes import RecipeError, render
from flashfleet.recipes.rules import sglang_flags

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
SHIPPED = ROOT / "flashfleet" / "catalog" / "sglang_flags.txt"


def test_shipped_flag_list_is_the_pinned_sglang_parsers(tmp_path: Path) -> None:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    fresh = tmp_path / "flags.txt"
    done = subprocess.run(
        [str(ORACLE), str(ROOT / "scripts" / "sglang_flags.py"), str(fresh)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert fresh.read_text() == SHIPPED.read_text(), "stale: run scripts/sglang_flags.py with the oracle venv"


def test_extra_flags_are_checked_against_the_list() -> None:
    assert "--chunked-prefill-size" in sglang_flags()
    assert len(sglang_flags()) > 400
    render("gb300", "low-latency", "unified", {"extra_args": ("--chunked-prefill-size", "4096")})
    with pytest.raises(RecipeError, match="did you mean --chunked-prefill-size") as err:
        render("gb300", "low-latency", "unified", {"extra_args": ("--chunked-prefil-size", "4096")})
    assert err.value.rule == "extra-args-known-flag"
