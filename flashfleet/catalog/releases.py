"""SGLang release versions: how a release tag reads, and the first one that serves GLM-5.3-Flash."""

from __future__ import annotations

import re

_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?$")
MIN_VERSION = (0, 5, 20)  # first SGLang release with GLM-5.3-Flash support


def parse_version(text: str) -> tuple[int, int, int]:
    match = _VERSION.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a release version like v0.5.23")
    return int(match[1]), int(match[2]), int(match[3])
