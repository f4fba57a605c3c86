#!/usr/bin/env python3
"""Checks, inside the serving image, that GLM-5.3-Flash's multimodal path can work.

transformers 5.12.1 has no glm5_next processor and silently answers image requests from the
text alone, so it is refused by name; the pinned release must import `Glm5NextProcessor`,
tokenizers must be recent enough, and torchcodec (video/audio decoding) must load.
Exit 0 and one "ok" line per check, or exit 1 with the reason. Standard library only.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from importlib import metadata


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check(args: argparse.Namespace) -> list[str]:
    """Returns the problems found (empty when the image is fit to serve images and video)."""
    transformers = installed("transformers")
    if transformers is None:
        return ["transformers is not installed"]
    if transformers in args.refuse_transformers:
        return [
            f"transformers {transformers} is refused: it has no glm5_next processor and answers "
            f"image requests from the text alone; install transformers=={args.expect_transformers}"
        ]
    problems = []
    if args.expect_transformers and transformers != args.expect_transformers:
        problems.append(f"transformers {transformers} installed, {args.expect_transformers} pinned")
    tokenizers = installed("tokenizers")
    if tokenizers is None or version_tuple(tokenizers) < version_tuple(args.min_tokenizers):
        problems.append(f"tokenizers {tokenizers} installed, >={args.min_tokenizers} required")
    try:
        processor = importlib.import_module("transformers").Glm5NextProcessor
        print(f"ok: {processor.__name__} imports from transformers {transformers}")
    except (ImportError, AttributeError) as exc:
        problems.append(f"Glm5NextProcessor does not import from transformers {transformers}: {exc}")
    for pin in args.expect:  # the stack's lock: exactly these versions
        name, _, version = pin.partition("==")
        if installed(name) != version:
            problems.append(f"{name} {installed(name)} installed, the lock has {version}")
    if not args.skip_torchcodec:
        try:
            importlib.import_module("torchcodec.decoders")
            print(f"ok: torchcodec {installed('torchcodec')} loads")
        except Exception as exc:  # a missing FFmpeg or torch ABI mismatch raises many types
            problems.append(f"torchcodec does not load: {type(exc).__name__}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-transformers", default="", help="exact transformers version")
    parser.add_argument("--min-tokenizers", default="0", help="lowest tokenizers version")
    parser.add_argument("--refuse-transformers", nargs="*", default=[], metavar="VERSION",
                        help="transformers versions refused by name")  # fmt: skip
    parser.add_argument("--skip-torchcodec", action="store_true", help="do not load torchcodec")
    parser.add_argument("--expect", action="append", default=[], metavar="NAME==VERSION",
                        help="a version the image must hold exactly (the stack's lock)")  # fmt: skip
    problems = check(parser.parse_args(argv))
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print("multimodal check passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
