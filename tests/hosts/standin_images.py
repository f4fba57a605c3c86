"""The simulated image world behind the stand-in docker engine: which SGLang tags the registry
has (per architecture), what each base image ships of the multimodal packages (as the release's
own wheel requires them: flashfleet/catalog/image_packages.toml), and minimal Python distributions
the stand-in `pip install` of a `docker build` copies into an image. The transformers stand-ins
reproduce the one difference the role's check cares about: 5.17.0 and 5.19.0 export
Glm5NextProcessor, 5.12.1 does not (the real releases are exercised by
tests/roles/test_check_multimodal.py, the release's real torch and torchcodec by
tests/roles/test_release_image_check.py). A stand-in `pip` answers `pip check` from the
distributions' own Requires-Dist, as pip does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

TAGS = {
    "lmsysorg/sglang:v0.5.23": ["amd64"],
    "lmsysorg/sglang:v0.5.23-cu130": ["amd64", "arm64"],
    "lmsysorg/sglang:v0.5.23-rocm720-mi35x": ["amd64"],
    "lmsysorg/sglang:v0.5.19-cu129": ["amd64"],
}


# What each base ships in its Python environment: v0.5.23's own pins (its wheel's Requires-Dist;
# torchcodec left out on arm64 and in the ROCm build, whose torch is AMD's), and pip.
_RELEASE = ["pip-26.0", "sglang-0.5.23", "transformers-5.19.0", "tokenizers-0.23.2"]
SHIPS = {
    "lmsysorg/sglang:v0.5.23": {"amd64": [*_RELEASE, "torchcodec-0.17.0"]},
    "lmsysorg/sglang:v0.5.23-cu130": {"amd64": [*_RELEASE, "torchcodec-0.17.0"], "arm64": _RELEASE},
    "lmsysorg/sglang:v0.5.23-rocm720-mi35x": {"amd64": _RELEASE},
}


def registry() -> dict[str, object]:
    def digest(ref: str, arch: str) -> str:
        return "sha256:" + hashlib.sha256(f"{ref}/{arch}".encode()).hexdigest()

    return {
        ref: {"platforms": {a: digest(ref, a) for a in arches}, "site": SHIPS.get(ref, {})}
        for ref, arches in TAGS.items()
    }


# `python -m pip check` over the distributions on the path: each Requires-Dist (NAME==X or bare
# NAME) against what is installed, in pip's words; exit 1 when one breaks.
PIP_CHECK = """import sys
from importlib import metadata
if sys.argv[1:] != ["check"]:
    sys.exit("stand-in pip: only `pip check`")
have = {d.metadata["Name"].lower(): d.version for d in metadata.distributions()}
broken = []
for d in metadata.distributions():
    for req in d.requires or []:
        name, _, want = req.partition("==")
        name = name.strip().lower()
        if name not in have:
            broken.append(f"{d.metadata['Name']} {d.version} requires {name}, which is not installed.")
        elif want and have[name] != want.strip():
            broken.append(f"{d.metadata['Name']} {d.version} has requirement {name}=={want.strip()}, "
                          f"but you have {name} {have[name]}.")
print("\\n".join(broken) if broken else "No broken requirements found.")
sys.exit(1 if broken else 0)
"""


GLM5_INIT = "from .models.glm5_next.processing_glm5_next import Glm5NextProcessor\n"


def _transformers(version: str) -> dict[str, str]:
    return {
        "transformers/__init__.py": f'__version__ = "{version}"\n' + GLM5_INIT,
        "transformers/models/__init__.py": "",
        "transformers/models/glm5_next/__init__.py": "",
        "transformers/models/glm5_next/processing_glm5_next.py": "class Glm5NextProcessor:\n    pass\n",
    }


PACKAGES: dict[str, dict[str, str]] = {
    "transformers-5.17.0": _transformers("5.17.0"),
    "transformers-5.19.0": _transformers("5.19.0"),
    "transformers-5.12.1": {"transformers/__init__.py": '__version__ = "5.12.1"\n'},
    "tokenizers-0.23.2": {"tokenizers/__init__.py": '__version__ = "0.23.2"\n'},
    "tokenizers-0.23.3": {"tokenizers/__init__.py": '__version__ = "0.23.3"\n'},
    "torchcodec-0.17.0": {
        "torchcodec/__init__.py": '__version__ = "0.17.0"\n',
        "torchcodec/decoders/__init__.py": "class VideoDecoder:\n    pass\n",
    },
    "sglang-0.5.23": {"sglang/__init__.py": '__version__ = "0.5.23"\n'},
    "pip-26.0": {"pip/__init__.py": "", "pip/__main__.py": PIP_CHECK},
}
# Requires-Dist of the stand-in distributions: the release's exact pins, as its wheel has them
REQUIRES = {"sglang-0.5.23": ["transformers==5.19.0", "tokenizers==0.23.2"]}


def write(root: Path) -> None:
    """Writes registry.json and pypi/ under `root` (the host's /etc/flashfleet-test)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.json").write_text(json.dumps(registry(), indent=2))
    for dist, files in PACKAGES.items():
        name, version = dist.split("-", 1)
        base = root / "pypi" / dist
        for rel, content in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(content)
        info = base / f"{name}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        requires = "".join(f"Requires-Dist: {r}\n" for r in REQUIRES.get(dist, []))
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}")
