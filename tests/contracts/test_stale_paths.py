"""Comments, docstrings and docs name only files, modules and tests that exist
(scripts/stale_paths.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "stale_paths.py"


def _script():
    spec = importlib.util.spec_from_file_location("stale_paths", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_repository_names_nothing_that_is_gone() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_each_kind_of_stale_reference_is_found(tmp_path: Path) -> None:
    (tmp_path / "flashfleet" / "bringup").mkdir(parents=True)
    (tmp_path / "flashfleet" / "__init__.py").write_text("")
    (tmp_path / "flashfleet" / "bringup" / "__init__.py").write_text("")
    (tmp_path / "flashfleet" / "bringup" / "converge.py").write_text("def reach():\n    pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_converge.py").write_text("def test_kept():\n    pass\n")
    doc = tmp_path / "notes.md"
    doc.write_text(
        "flashfleet/bringup/converge.py and flashfleet/bringup/{converge,runner}.py\n"
        "tests/test_converge.py::test_kept, tests/test_converge.py::test_gone\n"
        "flashfleet.bringup.converge.reach, flashfleet.bringup.converge.missing, flashfleet.bringup.runner\n"
        "converge.py beside outputs.py; the `converge` module and the `runner` module\n"
        "stacks/Pulumi.<stack>.yaml, the flashfleet/sglang image\n"
    )
    code = tmp_path / "flashfleet" / "bringup" / "walk.py"
    code.write_text('# see docs/gone.md\nPATH = "docs/generated.md"  # written at run time\n')
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(_script().stale(tmp_path, files)) == sorted([
        "notes.md:1: flashfleet/bringup/runner.py",
        "notes.md:2: tests/test_converge.py::test_gone",
        "notes.md:3: flashfleet.bringup.converge.missing",
        "notes.md:3: flashfleet.bringup.runner",
        "notes.md:4: outputs.py",
        "notes.md:4: `runner` module",
        "flashfleet/bringup/walk.py:1: docs/gone.md",
    ])  # fmt: skip
