"""Module names say what they are: `cli/<command>.py` is the command of that name, and every
other module name appears once in the package, so an import or a traceback names one file."""

from collections import Counter
from pathlib import Path

from flashfleet.cli import COMMANDS

PACKAGE = Path(__file__).resolve().parents[2] / "flashfleet"
PER_PACKAGE = {"__init__.py", "__main__.py", "errors.py"}  # one per package, by convention


def test_module_names_outside_the_cli_appear_once():
    names = Counter(
        path.name
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "cli" and path.name not in PER_PACKAGE
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_each_cli_module_is_the_command_of_its_name():
    modules = {path.stem for path in (PACKAGE / "cli").glob("*.py")} - {"__init__", "common"}
    assert modules == {module for module, _ in COMMANDS.values()}
    assert all(name == module for name, (module, _) in COMMANDS.items())
