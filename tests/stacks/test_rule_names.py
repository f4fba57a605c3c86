"""A refusal's `[rule: ...]` is the project's name for the rule, never pydantic's internal error
type (`value_error`, `missing`, `extra_forbidden`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flashfleet.cli import main

S = "flashfleet:stack"
Doc = dict[str, Any]


def _spec(d: Doc) -> Doc:
    return d["config"][S]


CASES = [
    ("missing", lambda d: _spec(d).pop("description"), "description", "required"),
    ("extra", lambda d: _spec(d).update(colour="blue"), "colour", "unknown-key"),
    ("value-error", lambda d: _spec(d)["image"].update(version="latest"), "image.version", "invalid-value"),
    ("bound", lambda d: _spec(d)["nodes"].update(count=0), "nodes.count", "range"),
    ("literal", lambda d: _spec(d).update(lock="sometimes"), "lock", "choice"),
    ("type", lambda d: _spec(d)["nodes"].update(count="two"), "nodes.count", "type"),
]


@pytest.mark.parametrize(("change", "path", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_refused_field_names_the_projects_rule_not_pydantics(
    write_stack: Callable[[str, Callable[[Doc], None]], Path],
    capsys: pytest.CaptureFixture[str],
    change: Callable[[Doc], None],
    path: str,
    rule: str,
) -> None:
    stacks = write_stack("h200-lowlat", change)
    assert main(["validate", "broken", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if f"{S}.{path}:" in ln]
    assert line.endswith(f"[rule: {rule}]"), line
    # no pydantic error type anywhere in the refusal
    assert not re.search(r"\[rule: [a-z]+_[a-z_]+\]", err), err
