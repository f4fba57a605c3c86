#!/usr/bin/env python3
"""Prints an SGLang release's entry for flashfleet/catalog/image_packages.toml, read from the
release's own wheel: its METADATA's `Requires-Dist` lines for the packages the derived image
cares about (torch, torchcodec, transformers, tokenizers), markers as written.

    python3 scripts/release_requirements.py v0.5.23 [--index-url URL]

Downloads the x86_64 and aarch64 wheels of sglang==VERSION with pip (no dependencies) and refuses
to print where the two platforms' wheels disagree (the catalog keeps one list, with markers). Run
it with a python3 that has pip and packaging (the project's uv environment has no pip).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WANTED = ("tokenizers", "torch", "torchcodec", "transformers")
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_34_aarch64")


def requirements(wheel: Path) -> list[str]:
    """The wheel's `Requires-Dist` of the wanted packages, without extras."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        value = line.removeprefix("Requires-Dist: ")
        req = Requirement(value)
        if req.name in WANTED and (req.marker is None or "extra" not in str(req.marker)):
            out.append(value)
    return sorted(out)


def download(version: str, platform: str, folder: Path, index_url: str | None) -> Path:
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "--platform", platform, "-d", str(folder),
            f"sglang=={version}"]  # fmt: skip
    if index_url:
        argv += ["--index-url", index_url]
    subprocess.run(argv, check=True)
    [wheel] = [w for w in folder.glob(f"sglang-{version}-*.whl") if platform.split("_", 2)[-1] in w.name]
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", help="an SGLang release tag, e.g. v0.5.23")
    parser.add_argument("--index-url", default=None, help="the package index to read (default: pip's)")
    args = parser.parse_args()
    version = args.release.removeprefix("v")
    with tempfile.TemporaryDirectory() as tmp:
        found = {p: requirements(download(version, p, Path(tmp), args.index_url)) for p in PLATFORMS}
    x86, arm = (found[p] for p in PLATFORMS)
    if x86 != arm:
        print(
            f"release_requirements: the x86_64 and aarch64 wheels disagree: {x86} vs {arm}", file=sys.stderr
        )
        return 1
    print(f'[releases."v{version}"]')
    print(f'source = "sglang {version} wheel METADATA on PyPI"')
    print("requires = [")
    for line in x86:
        print(f"  '{line}',")
    print("]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
