"""One rule for a stack's name wherever it enters (flashfleet.stack.stack_names): a command's
argument, a stack file's name and the name a run folder is made under. The finding's cases:
`configure ../../x --inventory F` made and chmodded a folder outside the runs folder, and a stack
file named with a template passed `validate`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.handoff import new_run_dir
from flashfleet.cli import main
from flashfleet.stack import DEFAULT_STACKS_DIR

BAD = ["../../x", "..", "a/../b", "{{ x }}", "a\nb", "-rf", ".hidden", "a b", "a/b/c/d", ""]


@pytest.mark.parametrize("name", BAD)
def test_a_run_folder_is_never_made_for_a_name_outside_the_rule(tmp_path: Path, name: str) -> None:
    runs = tmp_path / "runs" / "deep"
    with pytest.raises(BringupInputError, match=r"is not a stack name.*\[rule: stack-name\]"):
        new_run_dir(runs, name, "site.yml")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == []


def test_configure_with_a_climbing_name_touches_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    runs = tmp_path / "a" / "b" / "runs"
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {}}}))
    rc = main(["configure", "../../../outside/x", "--inventory", str(inventory), "--runs-dir", str(runs)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "is not a stack name" in err
    assert oct(outside.stat().st_mode & 0o777) == "0o755"
    assert list(outside.iterdir()) == []
    assert not runs.exists()


@pytest.mark.parametrize("name", ["{{ x }}", "a b", "-x"])
def test_a_stack_file_named_outside_the_rule_fails_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    shutil.copy(DEFAULT_STACKS_DIR / "Pulumi.h200-lowlat.yaml", tmp_path / f"Pulumi.{name}.yaml")
    rc = main(["validate", "--stacks-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert rc == 2, out
    assert "is not a stack name" in out.out + out.err


@pytest.mark.parametrize("name", ["h200-lowlat", "org/h200-lowlat", "Org_1/proj.x/h200-lowlat"])
def test_pulumi_s_own_names_pass(tmp_path: Path, name: str) -> None:
    assert new_run_dir(tmp_path, name, "site.yml").is_dir()
