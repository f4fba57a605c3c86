"""flashfleet.table: the one printer every command's table goes through."""

from __future__ import annotations

from flashfleet.table import aligned, markdown


def test_columns_line_up_at_the_widest_cell_two_spaces_apart() -> None:
    lines = aligned([["name", "n", "what"], ["a-longer-name", "12", "x"], ["b", "3", "a last cell"]])
    assert lines == [
        "name           n   what",
        "a-longer-name  12  x",
        "b              3   a last cell",
    ]


def test_right_aligned_columns_end_together_and_no_line_ends_in_a_space() -> None:
    lines = aligned([["fee", "per"], ["2400.00 USD", "12.50"], ["12000.00 USD", "-"]], right={0, 1})
    assert lines == [
        "         fee    per",
        " 2400.00 USD  12.50",
        "12000.00 USD      -",
    ]
    assert aligned([["a", ""], ["bb", ""]]) == ["a", "bb"]


def test_a_shorter_row_is_a_continuation_line_under_the_columns() -> None:
    lines = aligned([["cell", "Verified"], ["", "  option=x: why"], ["longer cell", "disabled"]])
    assert lines == ["cell         Verified", "               option=x: why", "longer cell  disabled"]


def test_markdown_escapes_a_bar_inside_a_cell() -> None:
    assert markdown(("option", "values"), [["`kv`", "a | b"]]) == [
        "| option | values |",
        "|---|---|",
        "| `kv` | a \\| b |",
    ]
