"""What the CLI prints and writes: YAML with every value written out (no `&id001` anchors), and
an output file whose folder does not exist refused (exit 2, one line) without making folders."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from flashfleet.cli import main

REPO = Path(__file__).resolve().parents[2]
ALIAS = re.compile(r"[&*]id\d+")


@pytest.mark.parametrize("stack", ["mi355x-replicas", "mi355x-lowlat"])
def test_inventory_yaml_has_no_anchors_and_says_what_the_json_says(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inventory", stack]) == 0
    text = capsys.readouterr().out
    assert not ALIAS.search(text), ALIAS.findall(text)
    assert main(["inventory", stack, "--format", "json"]) == 0
    assert yaml.safe_load(text) == json.loads(capsys.readouterr().out)


def test_manifest_yaml_has_no_anchors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "mi355x-k8s"]) == 0
    text = capsys.readouterr().out
    assert not ALIAS.search(text), ALIAS.findall(text)
    assert len([d for d in yaml.safe_load_all(text) if d]) > 1


def test_timeline_into_a_missing_folder_is_refused_and_makes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(REPO / "examples" / "bringup" / "events.jsonl", run / "events.jsonl")
    target = tmp_path / "nonexistent" / "dir" / "x.png"
    assert main(["timeline", str(run), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--output {target}: no such folder {target.parent}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "nonexistent").exists()
    assert sorted(p.name for p in run.iterdir()) == ["events.jsonl"]  # no chart drawn either
    # into a folder that exists it draws
    assert main(["timeline", str(run), "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 0
