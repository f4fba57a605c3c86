"""The strict reader and the round-trip editor on layouts and repeats a person writes."""

from pathlib import Path

import pytest

from flashfleet.stack.yamlfile import YamlFileError, parse_yaml
from flashfleet.yaml_edit import edit_yaml


def test_a_repeated_key_names_the_key_and_line_but_not_its_values() -> None:
    text = "config:\n  token: hf_first\n  token: hf_second\n"
    with pytest.raises(YamlFileError) as err:
        parse_yaml(text)
    assert str(err.value) == "key 'token' appears twice in one mapping (line 3)"


def test_values_read_as_pyyaml_reads_them() -> None:
    # stack files were written for PyYAML's YAML 1.1 reading
    assert parse_yaml("a: yes\nb: 0755\nc: off\n") == {"a": True, "b": 493, "c": False}


@pytest.mark.parametrize(
    "text",
    [
        "config:\n  a:\n    b: 1\n  l:\n  - x\n",  # dashes flush with their key
        "config:\n    a:\n        b: 1\n    l:\n      - x\n",  # four-space mappings, dash at two
    ],
)
def test_an_edit_keeps_the_file_s_indents(tmp_path: Path, text: str) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(text)
    edit_yaml(path, lambda doc: doc["config"]["l"].append("y"))
    *_, dash_line = text.splitlines()
    assert path.read_text() == text + dash_line.replace("x", "y") + "\n"
