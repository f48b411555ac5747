"""Printing tables that stay readable on a narrow terminal (80 columns and less).

Rich shortens a cell with "…" when a table's columns cannot all get their minimum width,
which cut metric and run names ("entity_typ…"). ``print_table`` prints a table as it is when
every column can get its minimum width (the longest word of each cell, so names are never
cut), and otherwise transposes it: one block per row, one ``header  value`` line per column.
"""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

_UNBOUNDED = 100_000


def min_width(console: Console, table: Table) -> int:
    """The narrowest width at which rich can lay ``table`` out without cutting a word."""
    options = console.options.update_width(_UNBOUNDED)
    return table.__rich_measure__(console, options).minimum


def fits(console: Console, table: Table) -> bool:
    return min_width(console, table) <= console.width


def _plain(value: RenderableType) -> str:
    text = value.plain if isinstance(value, Text) else str(value)
    return " ".join(text.split())


def transposed(table: Table) -> list[RenderableType]:
    """The same cells, one block per row: the first column as the block's heading."""
    columns = table.columns
    cells = [list(column.cells) for column in columns]
    out: list[RenderableType] = []
    if table.title:
        out.append(Text(_plain(table.title), style="bold"))
    for row in range(table.row_count):
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for column, column_cells in zip(columns[1:], cells[1:], strict=True):
            grid.add_row(_plain(column.header), column_cells[row])
        out.append(cells[0][row] if cells else Text(""))
        out.append(Padding(grid, (0, 0, 0, 2)))
    if table.caption:
        out.append(Text(_plain(table.caption)))
    return out


def print_table(console: Console, renderable: RenderableType) -> None:
    """``console.print``, except that a table too wide for the console is transposed."""
    if isinstance(renderable, Table) and not fits(console, renderable):
        for part in transposed(renderable):
            console.print(part)
        return
    console.print(renderable)
