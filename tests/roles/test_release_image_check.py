"""The sglang_image role's in-image check against the release's real packages: the oracle venv
(scripts/setup.d/10-sglang-oracle.sh) holds what SGLang 0.5.23's own wheel requires, torch 2.14.1
from PyPI with its CUDA libraries, torchcodec 0.17.0, transformers 5.19.0 and tokenizers 0.23.2,
beside the sglang wheel itself; Debian's FFmpeg (scripts/setup.d/12-ffmpeg.sh) is the decoder's.

The pins the check is given are flashfleet's own decision for an H200 node of v0.5.23
(flashfleet/stack/image_packages.py): on that environment every pin holds, pip check finds no new
conflict, and torchcodec decodes a clip made with FFmpeg on CPU. The pins the project shipped
before (transformers 5.17.0 under the release's 5.19.0, torchcodec 0.9.1 beside torch 2.14.1)
fail it, each naming the package and the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flashfleet.catalog import hardware_catalog
from flashfleet.stack.image_packages import image_packages

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "roles/sglang_image/files/check_multimodal.py"
ORACLE = Path(os.environ.get("FLASHFLEET_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
RELEASE = "v0.5.23"


def _expect(hardware: str) -> list[str]:
    held = image_packages(RELEASE, hardware_catalog()[hardware])
    return [arg for p in held.packages for arg in ("--expect", p.requirement)]


@pytest.fixture(scope="module")
def oracle() -> Path:
    if not ORACLE.exists():
        pytest.fail(f"the sglang oracle venv is missing ({ORACLE}); run scripts/setup.d/10-sglang-oracle.sh")
    assert shutil.which("ffmpeg"), "Debian's FFmpeg: run scripts/setup.d/12-ffmpeg.sh"
    return ORACLE


@pytest.fixture(scope="module")
def base_conflicts(oracle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release environment's own `pip check`, as the Dockerfile records the base's before the
    build (the oracle installs sglang without its serving-only dependencies)."""
    run = subprocess.run([str(oracle), "-m", "pip", "check"], capture_output=True, text=True, check=False)
    out = tmp_path_factory.mktemp("base") / "base-pip-check.txt"
    out.write_text(run.stdout)
    return out


def _check(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), str(SCRIPT), *args], capture_output=True, text=True, check=False)


def _versions(stdout: str) -> dict[str, str | None]:
    [line] = [ln for ln in stdout.splitlines() if ln.startswith("versions: ")]
    return dict(json.loads(line.removeprefix("versions: ")))


def test_the_release_environment_passes_the_check_and_decodes_video(
    oracle: Path, base_conflicts: Path
) -> None:
    result = _check(
        oracle, *_expect("h200"), "--base-conflicts", str(base_conflicts), "--refuse-transformers", "5.12.1"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: Glm5NextProcessor imports from transformers 5.19.0" in result.stdout
    assert "ok: pip check finds no conflict the derived build brought in" in result.stdout
    # the seed's processor samples at 2 FPS: four frames of a two-second clip, decoded on CPU
    assert "ok: torchcodec 0.17.0 decoded 4 frames of (3, 48, 64) at 2 FPS from a 2 s clip" in result.stdout
    found = _versions(result.stdout)
    torch = image_packages(RELEASE, hardware_catalog()["h200"]).torch
    assert torch is not None
    assert found["torch"] is not None
    assert "==" + found["torch"].split("+")[0] == torch  # the release's own torch, not a stand-in
    assert found["sglang"] == RELEASE.removeprefix("v")


@pytest.fixture(scope="module")
def old_pins(oracle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release environment with the pins the project shipped before installed over it: a venv
    whose own site-packages come first, the release's after them (a .pth file)."""
    uv = shutil.which("uv")
    assert uv, "uv is installed by scripts/test.sh"
    venv = tmp_path_factory.mktemp("old-pins")
    env = {**os.environ, "UV_COMPILE_BYTECODE": "0"}
    subprocess.run([uv, "venv", "-q", "--seed", "-p", str(oracle.resolve()), str(venv)], check=True, env=env)
    [release_site] = (oracle.parents[1] / "lib").glob("python3*/site-packages")
    [site] = (venv / "lib").glob("python3*/site-packages")
    (site / "release.pth").write_text(f"{release_site}\n")
    subprocess.run([uv, "pip", "install", "-q", "--no-deps", "-p", str(venv / "bin/python"),
                    "torchcodec==0.9.1", "transformers==5.17.0"], check=True, env=env)  # fmt: skip
    return venv / "bin/python"


def test_the_old_pins_fail_each_naming_the_package_and_the_reason(
    old_pins: Path, base_conflicts: Path
) -> None:
    result = _check(
        old_pins, *_expect("h200"), "--base-conflicts", str(base_conflicts), "--refuse-transformers", "5.12.1"
    )
    assert result.returncode == 1, result.stdout
    fails = result.stderr
    assert "FAIL: transformers 5.17.0 installed, transformers==5.19.0 pinned" in fails, fails
    assert "FAIL: torchcodec 0.9.1 installed, torchcodec==0.17.0 pinned" in fails, fails
    # torchcodec's own loader names the torch it was not built for
    assert "FAIL: torchcodec does not decode: RuntimeError: Could not load libtorchcodec" in fails, fails
    assert "The PyTorch version (2.14.1" in fails, fails
    assert "is not compatible" in fails, fails
    # and pip's own check names the release's requirement the downgrade broke
    assert "FAIL: pip check: sglang 0.5.23 has requirement transformers==5.19.0" in fails, fails
