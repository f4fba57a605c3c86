"""The README stays true: its option table is what `flashfleet options --format markdown` prints."""

from pathlib import Path

from flashfleet.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_option_table_matches_the_code(capsys):
    assert main(["options", "--format", "markdown"]) == 0
    table = capsys.readouterr().out.strip()
    assert table in README.read_text()


def test_readme_setup_installs_lean_and_puts_flashfleet_on_path():
    text = README.read_text()
    # the user's install leaves the dev group out; the tests install it (scripts/test.sh syncs it)
    assert "uv sync --frozen --no-dev && . .venv/bin/activate && flashfleet plan gb300-lowlat" in text
    assert "--no-dev" not in (README.parent / "scripts" / "test.sh").read_text()
