"""Contract: docs/stack-spec.md is what scripts/spec_reference.py makes of the spec today, so the
reference page a user reads names every field the spec takes, with its type and default."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("spec_reference", ROOT / "scripts" / "spec_reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["spec_reference"] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_current() -> None:
    page = (ROOT / "docs" / "stack-spec.md").read_text()
    assert page == _script().render(), "stale: run `python scripts/spec_reference.py`"


def test_the_page_names_every_field_of_the_spec_as_a_stack_file_spells_it() -> None:
    from flashfleet.stack.spec import AwsSource, ExistingHost, StackSpec

    page = (ROOT / "docs" / "stack-spec.md").read_text()
    for model in (StackSpec, AwsSource, ExistingHost):
        assert f"## {model.__name__}\n" in page
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in page, (model.__name__, name)
    # the camelCase spelling, not Python's
    assert "| `hostMemoryGib` |" in page
    assert "host_memory_gib" not in page
