"""Helpers: copy a catalog stack file, change it, write it into a temporary stacks folder."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.stack import DEFAULT_STACKS_DIR, stack_path

Doc = dict[str, Any]


def catalog_doc(name: str) -> Doc:
    return yaml.safe_load(stack_path(name, DEFAULT_STACKS_DIR).read_text())


@pytest.fixture
def write_stack(tmp_path: Path) -> Callable[[str, Callable[[Doc], None]], Path]:
    """write_stack(base, change) -> stacks dir holding Pulumi.broken.yaml = change(copy of base)."""

    def write(base: str, change: Callable[[Doc], None]) -> Path:
        doc = copy.deepcopy(catalog_doc(base))
        change(doc)
        (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump(doc))
        return tmp_path

    return write
