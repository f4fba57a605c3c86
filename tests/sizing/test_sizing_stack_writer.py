"""Storing the result in a stack file: comments kept, the alternative removed, the render uses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flashfleet.recipes import render
from flashfleet.sizing import SizingError
from flashfleet.sizing.stack_writer import read_options, write_sizing

STACK = """\
# H200 bench stack: one node, low latency
config:
  aws:region: us-east-2   # capacity block region
  flashfleet:stack:
    hardware: h200
    strategy: low-latency
    # tuned by hand last week
    options:
      hicache: "off"
      max_mamba_cache_size: 40  # old pin
      tp: 8
"""


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.bench.yaml").write_text(STACK)
    (tmp_path / "Pulumi.bare.yaml").write_text("config:\n  aws:region: us-east-2\n")
    return tmp_path


def test_ratio_replaces_the_pin_and_keeps_comments(stacks: Path) -> None:
    options = write_sizing(stacks, "bench", "mamba_full_memory_ratio", 1.78)
    assert options == {"hicache": "off", "tp": 8, "mamba_full_memory_ratio": 1.78}
    text = (stacks / "Pulumi.bench.yaml").read_text()
    for kept in (
        "# H200 bench stack",
        "# capacity block region",
        "# tuned by hand last week",
        'hicache: "off"',
    ):
        assert kept in text
    assert "max_mamba_cache_size" not in text
    assert "      mamba_full_memory_ratio: 1.78\n" in text


def test_pin_replaces_the_ratio(stacks: Path) -> None:
    write_sizing(stacks, "bench", "mamba_full_memory_ratio", 1.78)
    options = write_sizing(stacks, "bench", "max_mamba_cache_size", 20)
    assert options["max_mamba_cache_size"] == 20
    assert "mamba_full_memory_ratio" not in options


def test_missing_sections_are_created(stacks: Path) -> None:
    write_sizing(stacks, "bare", "mamba_full_memory_ratio", 0.5)
    assert read_options(stacks, "bare") == {"mamba_full_memory_ratio": 0.5}
    assert "aws:region: us-east-2" in (stacks / "Pulumi.bare.yaml").read_text()


def test_stored_values_render_as_flags(stacks: Path) -> None:
    write_sizing(stacks, "bench", "mamba_full_memory_ratio", 1.78)
    argv = render("h200", "low-latency", overrides=read_options(stacks, "bench")).processes[0].argv
    i = argv.index("--mamba-full-memory-ratio")
    assert argv[i + 1] == "1.78"
    assert "--max-mamba-cache-size" not in argv
    write_sizing(stacks, "bench", "max_mamba_cache_size", 20)
    argv = render("h200", "low-latency", overrides=read_options(stacks, "bench")).processes[0].argv
    assert argv[argv.index("--max-mamba-cache-size") + 1] == "20"
    assert "--mamba-full-memory-ratio" not in argv


def test_unknown_stack_lists_the_known_ones(stacks: Path) -> None:
    with pytest.raises(SizingError, match=r"unknown stack 'prod'.*stacks: bare, bench"):
        write_sizing(stacks, "prod", "mamba_full_memory_ratio", 1.0)


@pytest.mark.parametrize("name", ["../bench", "a/b", ""])
def test_path_like_names_refused(stacks: Path, name: str) -> None:
    with pytest.raises(SizingError, match="stack name"):
        write_sizing(stacks, name, "mamba_full_memory_ratio", 1.0)


def test_values_the_recipe_engine_refuses_are_not_written(stacks: Path) -> None:
    before = (stacks / "Pulumi.bench.yaml").read_text()
    with pytest.raises(SizingError, match="cannot store max_mamba_cache_size=0"):
        write_sizing(stacks, "bench", "max_mamba_cache_size", 0)
    with pytest.raises(SizingError, match="not a sizing option"):
        write_sizing(stacks, "bench", "tp", 4)
    assert (stacks / "Pulumi.bench.yaml").read_text() == before


def test_invalid_yaml_is_one_clear_error(stacks: Path) -> None:
    (stacks / "Pulumi.broken.yaml").write_text("config: [unclosed\n")
    with pytest.raises(SizingError, match=r"Pulumi\.broken\.yaml: not valid YAML \(line 2\)"):
        write_sizing(stacks, "broken", "mamba_full_memory_ratio", 1.0)


REPO_STACKS = Path(__file__).resolve().parents[2] / "stacks"


@pytest.mark.parametrize("stack_file", sorted(REPO_STACKS.glob("Pulumi.*.yaml")), ids=lambda p: p.name)
def test_committed_stacks_change_only_in_their_options(tmp_path: Path, stack_file: Path) -> None:
    from flashfleet.planning.resolve import load_stack

    name = stack_file.name[len("Pulumi.") : -len(".yaml")]
    (tmp_path / stack_file.name).write_text(stack_file.read_text())
    write_sizing(tmp_path, name, "mamba_full_memory_ratio", 1.78)
    before = [line.rstrip() for line in stack_file.read_text().splitlines()]
    after = [line.rstrip() for line in (tmp_path / stack_file.name).read_text().splitlines()]
    added = [line for line in after if line not in before]
    removed = [line for line in before if line not in after]
    assert [line.strip() for line in added if line.strip() != "options:"] == ["mamba_full_memory_ratio: 1.78"]
    assert all(line.strip() == "options: {}" for line in removed), removed
    # the stack spec accepts the file, and its render carries the tuned flag on every server
    recipe = load_stack(name, tmp_path).recipe
    servers = [p for p in recipe.processes if p.role not in {"router", "encoder"}]
    assert servers
    for proc in servers:
        assert proc.argv[proc.argv.index("--mamba-full-memory-ratio") + 1] == "1.78"
