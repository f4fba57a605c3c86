"""The one table printer: rows of text cells, lined up for a terminal or written as Markdown.

Every table flashfleet prints (ls, matrix, capacity offers, bench --list-profiles) or writes
(the bench reports, `options --format markdown`, the host-vars docs table) goes through here, so
columns line up the same way everywhere. Plain Python and a leaf any layer may use: a table
library costs more start-up time than the CLI's budget leaves (benchmarks/cli_speed.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

GAP = "  "


def aligned(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    """Each row as one line, every column as wide as its widest cell and two spaces from the next.

    Columns whose index is in ``right`` (numbers) are right-aligned. A row may have fewer cells
    than others (a continuation line). No line ends in spaces: a left-aligned last cell is not padded.
    """
    widths: list[int] = []
    for row in rows:
        for i, cell in enumerate(row):
            if i == len(widths):
                widths.append(0)
            widths[i] = max(widths[i], len(cell))
    out = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        out.append(GAP.join(cells).rstrip())
    return out


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table: the header, its ``|---|`` line, one line per row; a ``|`` in a cell is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(r) for r in rows)]
