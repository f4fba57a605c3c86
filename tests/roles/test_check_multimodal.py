"""The sglang_image role's in-image check script, run for real against transformers releases
installed from the Python package index into throwaway virtual environments: 5.17.0 ships the
glm5_next processor, 5.12.1 does not (and is refused by name); pip's own check refuses a conflict
the build brought in and accepts the base's own. The release's real torch and torchcodec: the
slow test in tests/roles/test_release_image_check.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "roles/sglang_image/files/check_multimodal.py"
PINS = ["--expect", "transformers==5.17.0", "--expect", "tokenizers>=0.23.1"]


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
        # --seed: pip in the venv, as in the image (the check runs its `pip check`)
        subprocess.run([uv, "venv", "-q", "--seed", "-p", "3.11", str(venv)], check=True, env=env)
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
    assert "FAIL: torchcodec does not decode: ModuleNotFoundError" in result.stderr


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
    assert "FAIL: transformers 5.12.1 installed, transformers==5.17.0 pinned" in result.stderr


def test_tokenizers_below_the_floor_is_reported(venvs: dict[str, Path]) -> None:
    result = check(venvs["5.17.0"], "--expect", "tokenizers>=99.0", "--skip-torchcodec")
    assert result.returncode == 1
    assert "FAIL: tokenizers " in result.stderr
    assert "tokenizers>=99.0 pinned" in result.stderr


def test_the_versions_found_are_reported(venvs: dict[str, Path]) -> None:
    import json

    result = check(venvs["5.17.0"], *PINS, "--skip-torchcodec")
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("versions: ")]
    found = json.loads(line.removeprefix("versions: "))
    assert found["transformers"] == "5.17.0"
    assert found["torch"] is None
    assert found["torchcodec"] is None


@pytest.fixture
def conflict(venvs: dict[str, Path]):
    """A distribution in the 5.17.0 venv whose requirement its transformers breaks: what pip check
    reports of a derived build that moved a package under another's pin."""
    [site] = (venvs["5.17.0"].parents[1] / "lib").glob("python3*/site-packages")
    info = site / "pinned_elsewhere-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pinned-elsewhere\nVersion: 1.0\nRequires-Dist: transformers==5.12.1\n"
    )
    (info / "RECORD").write_text("")
    try:
        yield "pinned-elsewhere 1.0 has requirement transformers==5.12.1, but you have transformers 5.17.0."
    finally:
        shutil.rmtree(info)


def test_a_conflict_the_build_brought_in_fails(venvs: dict[str, Path], conflict: str) -> None:
    result = check(venvs["5.17.0"], *PINS, "--skip-torchcodec")
    assert result.returncode == 1
    assert f"FAIL: pip check: {conflict}" in result.stderr


def test_the_base_images_own_conflict_is_accepted(
    venvs: dict[str, Path], conflict: str, tmp_path: Path
) -> None:
    base = tmp_path / "base-pip-check.txt"
    base.write_text(conflict + "\n")
    result = check(venvs["5.17.0"], *PINS, "--skip-torchcodec", "--base-conflicts", str(base))
    assert result.returncode == 0, result.stderr
    assert f"accepted (the base's own, or a release pin replaced on purpose): {conflict}" in result.stdout


def test_a_release_pin_replaced_on_purpose_is_accepted(venvs: dict[str, Path], conflict: str) -> None:
    result = check(venvs["5.17.0"], *PINS, "--skip-torchcodec", "--override", "transformers")
    assert result.returncode == 0, result.stderr
    # only that name: another package's conflict would still fail
    other = check(venvs["5.17.0"], *PINS, "--skip-torchcodec", "--override", "tokenizers")
    assert other.returncode == 1


def test_pip_that_cannot_run_fails_the_check(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv
    bare = tmp_path / "bare"  # no --seed: no pip in it
    env = {**os.environ, "UV_COMPILE_BYTECODE": "0"}
    subprocess.run([uv, "venv", "-q", "-p", "3.11", str(bare)], check=True, env=env)
    subprocess.run([uv, "pip", "install", "-q", "-p", str(bare / "bin/python"), "transformers==5.17.0"],
                   check=True, env=env)  # fmt: skip
    result = check(bare / "bin/python", "--skip-torchcodec")
    assert result.returncode == 1
    assert "FAIL: pip check: could not run: " in result.stderr
    assert "No module named pip" in result.stderr
