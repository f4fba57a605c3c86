"""The README stays true: its option table is what `flashfleet options --format markdown` prints."""

import tomllib
from pathlib import Path

from flashfleet.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_option_table_matches_the_code(capsys):
    assert main(["options", "--format", "markdown"]) == 0
    table = capsys.readouterr().out.strip()
    assert table in README.read_text()


def test_readme_setup_installs_lean_and_puts_flashfleet_on_path():
    text = README.read_text()
    assert "$ scripts/install.sh && . .venv/bin/activate && flashfleet plan gb300-lowlat" in text
    install = (README.parent / "scripts" / "install.sh").read_text()
    assert "uv sync --frozen --quiet" in install  # the locked dependencies, no dev group
    assert "--group" not in install
    # a user's sync leaves the dev group out; the tests install it
    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text())
    assert pyproject["tool"]["uv"]["default-groups"] == []
    assert "compile-bytecode" not in pyproject["tool"]["uv"]  # no compiling on every `uv run`
    test_sh = (README.parent / "scripts" / "test.sh").read_text()
    assert "uv sync --frozen --group dev" in test_sh
    assert "export UV_COMPILE_BYTECODE=1" in test_sh  # the tests keep compiled bytecode
