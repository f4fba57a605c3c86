#!/usr/bin/env python3
"""Checks, inside the serving image, that GLM-5.3-Flash's multimodal path works as the seed asks.

- every pin holds (`--expect NAME==X` or `NAME>=X`): what the release ships and what the derived
  build added, and the stack's lock;
- transformers is not a release refused by name (5.12.1 has no glm5_next processor and silently
  answers image requests from the text alone), and `Glm5NextProcessor` imports;
- pip's own consistency check finds no conflict the derived build brought in: those of the base
  image as it was (`--base-conflicts FILE`, its `pip check` before the build) and the release pins
  replaced on purpose (`--override NAME`) are reported, not refused;
- torchcodec decodes a short clip made here with FFmpeg, at the processor's 2 frames a second, on
  CPU (unless `--skip-torchcodec`: no torchcodec is known to load beside the image's torch).
Prints one "ok:" line per check and the versions found as one `versions: {json}` line; exit 1 with
a "FAIL:" line per problem. Standard library only (the image's own packages are what is checked).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPORTED = ("sglang", "torch", "transformers", "tokenizers", "torchcodec")
FPS = 2  # the processor samples video at 2 frames a second (seed)
CLIP_SECONDS = 2


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:4])


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def holds(found: str | None, pin: str) -> tuple[str, bool]:
    """(name, whether the installed version meets the pin): NAME==X exactly, NAME>=X at least."""
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(==|>=)(.+)", pin)
    if match is None:
        raise SystemExit(f"FAIL: {pin!r} is not NAME==VERSION or NAME>=VERSION")
    name, op, want = match.groups()
    if found is None:
        return name, False
    if op == "==":
        return name, found.split("+")[0] == want
    return name, version_tuple(found) >= version_tuple(want)


def pip_conflicts() -> list[str]:
    """`pip check`'s conflicts (exit 1 lists them; anything else is pip failing to run)."""
    run = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    lines = [
        line for line in run.stdout.splitlines() if line.strip() and "No broken requirements" not in line
    ]
    # exit 1 with nothing listed is pip itself failing (no pip: python's own exit 1)
    if run.returncode not in (0, 1) or (run.returncode == 1 and not lines):
        raise RuntimeError((run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1])
    return lines


def new_conflicts(base_file: str | None, overrides: list[str]) -> tuple[list[str], list[str]]:
    """(conflicts the build brought in, conflicts accepted: the base's own and the overrides)."""
    base = set()
    if base_file and Path(base_file).is_file():
        base = {line for line in Path(base_file).read_text().splitlines() if line.strip()}
    accepted, refused = [], []
    for line in pip_conflicts():
        replaced = any(re.search(rf"has requirement {re.escape(n)}[=<>!~ ]", line, re.I) for n in overrides)
        (accepted if line in base or replaced else refused).append(line)
    return refused, accepted


def decode_clip() -> str:
    """Makes a short clip with FFmpeg and decodes it at 2 frames a second; returns what it read."""
    decoders = importlib.import_module("torchcodec.decoders")
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.mp4"
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i",
             f"testsrc=duration={CLIP_SECONDS}:size=64x48:rate=10", "-c:v", "mpeg4", "-y", str(clip)],
            check=True,
        )  # fmt: skip
        decoder = decoders.VideoDecoder(str(clip), device="cpu")
        seconds = [i / FPS for i in range(CLIP_SECONDS * FPS)]
        frames = decoder.get_frames_played_at(seconds=seconds)
        shape = tuple(frames.data.shape)
        if shape[0] != len(seconds):
            raise RuntimeError(f"asked for {len(seconds)} frames, decoded {shape[0]}")
        return f"{shape[0]} frames of {shape[1:]} at {FPS} FPS from a {CLIP_SECONDS} s clip"


def check(args: argparse.Namespace) -> list[str]:
    """Returns the problems found (empty when the image is fit to serve images and video)."""
    problems = []
    transformers = installed("transformers")
    if transformers is None:
        return ["transformers is not installed"]
    if transformers in args.refuse_transformers:
        return [
            f"transformers {transformers} is refused: it has no glm5_next processor and answers "
            "image requests from the text alone"
        ]
    for pin in args.expect:
        name, ok = holds(installed(re.split(r"==|>=", pin)[0]), pin)
        if not ok:
            problems.append(f"{name} {installed(name)} installed, {pin} pinned")
    try:
        processor = importlib.import_module("transformers").Glm5NextProcessor
        print(f"ok: {processor.__name__} imports from transformers {transformers}")
    except (ImportError, AttributeError) as exc:
        problems.append(f"Glm5NextProcessor does not import from transformers {transformers}: {exc}")
    if not args.skip_pip_check:
        try:
            refused, accepted = new_conflicts(args.base_conflicts, args.override)
        except RuntimeError as exc:
            refused, accepted = [f"could not run: {exc}"], []
        problems += [f"pip check: {line}" for line in refused]
        for line in accepted:
            print(f"ok: pip check, accepted (the base's own, or a release pin replaced on purpose): {line}")
        if not refused:
            print("ok: pip check finds no conflict the derived build brought in")
    if not args.skip_torchcodec:
        try:
            print(f"ok: torchcodec {installed('torchcodec')} decoded {decode_clip()}")
        except Exception as exc:  # a missing FFmpeg or a torch ABI mismatch raises many types
            problems.append(f"torchcodec does not decode: {type(exc).__name__}: {exc}")
    print("versions: " + json.dumps({name: installed(name) for name in REPORTED}, sort_keys=True))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", action="append", default=[], metavar="PIN",
                        help="NAME==VERSION or NAME>=VERSION the image must hold")  # fmt: skip
    parser.add_argument("--override", action="append", default=[], metavar="NAME",
                        help="a release pin the derived build replaces on purpose")  # fmt: skip
    parser.add_argument("--base-conflicts", default=None, metavar="FILE",
                        help="the base image's own `pip check` output, before the build")  # fmt: skip
    parser.add_argument("--refuse-transformers", nargs="*", default=[], metavar="VERSION",
                        help="transformers versions refused by name")  # fmt: skip
    parser.add_argument("--skip-torchcodec", action="store_true", help="do not decode with torchcodec")
    parser.add_argument("--skip-pip-check", action="store_true", help="do not run pip check")
    problems = check(parser.parse_args(argv))
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print("multimodal check passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
