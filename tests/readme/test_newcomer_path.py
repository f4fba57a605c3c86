"""The timed newcomer path (benchmarks/newcomer_path.py) runs what the README's top says, not a
shortcut of its own: each step it times is written in the README before the cloud path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_timed_step_is_in_the_readmes_top() -> None:
    spec = importlib.util.spec_from_file_location("newcomer_path", REPO / "benchmarks" / "newcomer_path.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    top = " ".join(text[: text.index("## The cloud path")].split())
    for said, _ in module.STEPS:
        assert " ".join(said.split()) in top, said
