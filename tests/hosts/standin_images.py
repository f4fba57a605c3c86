"""The simulated image world behind the stand-in docker engine: which SGLang tags the registry
has (per architecture), and minimal Python distributions the stand-in `pip install` of a
`docker build` copies into an image. The transformers stand-ins reproduce the one difference
the role's check cares about: 5.17.0 exports Glm5NextProcessor, 5.12.1 does not (the real
releases are exercised by tests/roles/test_check_multimodal.py).
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


def registry() -> dict[str, object]:
    def digest(ref: str, arch: str) -> str:
        return "sha256:" + hashlib.sha256(f"{ref}/{arch}".encode()).hexdigest()

    return {ref: {"platforms": {a: digest(ref, a) for a in arches}} for ref, arches in TAGS.items()}


GLM5_INIT = "from .models.glm5_next.processing_glm5_next import Glm5NextProcessor\n"
PACKAGES: dict[str, dict[str, str]] = {
    "transformers-5.17.0": {
        "transformers/__init__.py": '__version__ = "5.17.0"\n' + GLM5_INIT,
        "transformers/models/__init__.py": "",
        "transformers/models/glm5_next/__init__.py": "",
        "transformers/models/glm5_next/processing_glm5_next.py": "class Glm5NextProcessor:\n    pass\n",
    },
    "transformers-5.12.1": {"transformers/__init__.py": '__version__ = "5.12.1"\n'},
    "tokenizers-0.23.3": {"tokenizers/__init__.py": '__version__ = "0.23.3"\n'},
    "torchcodec-0.9.1": {
        "torchcodec/__init__.py": '__version__ = "0.9.1"\n',
        "torchcodec/decoders/__init__.py": "class VideoDecoder:\n    pass\n",
    },
}


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
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
