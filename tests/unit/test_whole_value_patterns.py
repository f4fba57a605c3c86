"""Names and versions are checked as whole values: with re.match, a pattern's `$` also accepts a
trailing newline, so `v0.5.23\n` or `abc\n` passed and went on into tags, file and object names."""

from __future__ import annotations

from pathlib import Path

import pytest

from flashfleet.catalog.releases import parse_version
from flashfleet.cli.common import UsageError, stack_arg
from flashfleet.k8s.errors import KubernetesRenderError
from flashfleet.k8s.names import check_stack_name
from flashfleet.sizing.errors import SizingError
from flashfleet.sizing.stack_writer import existing_stack_file


def test_release_version():
    assert parse_version("v0.5.23") == (0, 5, 23)
    with pytest.raises(ValueError, match="not a release version"):
        parse_version("v0.5.23\n")


def test_kubernetes_stack_name():
    assert check_stack_name("abc") == "abc"
    with pytest.raises(KubernetesRenderError, match="DNS label"):
        check_stack_name("abc\n")


def test_sizing_stack_name(tmp_path: Path):
    (tmp_path / "Pulumi.abc.yaml").write_text("config: {}\n")
    assert existing_stack_file(tmp_path, "abc") == tmp_path / "Pulumi.abc.yaml"
    with pytest.raises(SizingError, match="use letters, digits"):
        existing_stack_file(tmp_path, "abc\n")


def test_stack_file_argument(tmp_path: Path):
    """`stacks/Pulumi.abc.yaml\\n` is not the file of stack `abc`."""
    (tmp_path / "Pulumi.abc.yaml").write_text("config: {}\n")
    assert stack_arg(f"{tmp_path}/Pulumi.abc.yaml", tmp_path) == ("abc", tmp_path)
    with pytest.raises(UsageError, match="is not a stack name"):  # refused, not taken for `abc`
        stack_arg(f"{tmp_path}/Pulumi.abc.yaml\n", tmp_path)
