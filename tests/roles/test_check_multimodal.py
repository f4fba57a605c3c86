"""The sglang_image role's in-image check script, run for real against transformers releases
installed from the Python package index into throwaway virtual environments: 5.17.0 ships the
glm5_next processor, 5.12.1 does not (and is refused by name)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "roles/sglang_image/files/check_multimodal.py"
PINS = ["--expect-transformers", "5.17.0", "--min-tokenizers", "0.23.1"]


@pytest.fixture(scope="session")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    uv = shutil.which("uv")
    assert uv, "uv is installed by scripts/test.sh"
    pythons = {}
    # throwaway venvs: compiling transformers' bytecode (scripts/test.sh exports
    # UV_COMPILE_BYTECODE=1 for the project's venv) cost ~50 s and checks nothing here
    env = {**os.environ, "UV_COMPILE_BYTECODE": "0"}
    for version in ("5.17.0", "5.12.1"):
        venv = tmp_path_factory.mktemp(f"transformers-{version}")
        subprocess.run([uv, "venv", "-q", "-p", "3.11", str(venv)], check=True, env=env)
        subprocess.run([uv, "pip", "install", "-q", "-p", str(venv / "bin/python"),
                        f"transformers=={version}"], check=True, env=env)  # fmt: skip
        pythons[version] = venv / "bin/python"
    return pythons


def check(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), str(SCRIPT), *args], check=False, capture_output=True, text=True)


def test_5_17_0_has_the_glm5_next_processor(venvs: dict[str, Path]) -> None:
    result = check(venvs["5.17.0"], *PINS, "--refuse-transformers", "5.12.1", "--skip-torchcodec")
    assert result.returncode == 0, result.stderr
    assert "ok: Glm5NextProcessor imports from transformers 5.17.0" in result.stdout
    assert "multimodal check passed" in result.stdout


def test_missing_torchcodec_fails_the_check(venvs: dict[str, Path]) -> None:
    # the venv has no torchcodec: the same check the image runs must notice
    result = check(venvs["5.17.0"], *PINS)
    assert result.returncode == 1
    assert "FAIL: torchcodec does not load: ModuleNotFoundError" in result.stderr


def test_5_12_1_is_refused_by_name(venvs: dict[str, Path]) -> None:
    result = check(venvs["5.12.1"], *PINS, "--refuse-transformers", "5.12.1", "--skip-torchcodec")
    assert result.returncode == 1
    assert "FAIL: transformers 5.12.1 is refused" in result.stderr


def test_5_12_1_really_lacks_the_processor(venvs: dict[str, Path]) -> None:
    # without the name rule, the import check itself rejects 5.12.1
    result = check(venvs["5.12.1"], "--skip-torchcodec")
    assert result.returncode == 1
    assert "FAIL: Glm5NextProcessor does not import from transformers 5.12.1" in result.stderr


def test_a_different_pinned_release_is_reported(venvs: dict[str, Path]) -> None:
    result = check(venvs["5.12.1"], *PINS, "--skip-torchcodec")
    assert "FAIL: transformers 5.12.1 installed, 5.17.0 pinned" in result.stderr
