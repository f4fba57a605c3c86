"""The README stays true: its option table is what `flashfleet options --format markdown` prints."""

from pathlib import Path

from flashfleet.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_option_table_matches_the_code(capsys):
    assert main(["options", "--format", "markdown"]) == 0
    table = capsys.readouterr().out.strip()
    assert table in README.read_text()


def test_readme_setup_commands_exist():
    text = README.read_text()
    assert "uv run flashfleet plan gb300-lowlat" in text
    assert "scripts/test.sh" in text
    assert "scripts/test.sh" in (README.parent / ".ci" / "run").read_text()
