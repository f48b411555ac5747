"""``--help`` that reads at 80 columns: typer's option panel is a Rich table of up to seven
columns (required mark, long names, short names, ``--no-`` names, their short names, type,
help). At 80 columns Rich cut long names (``--min-gold-confide…``), the name columns took
48 of the 80 columns (``--min-gold-confidence`` beside ``--no-take-over-lock``), and the help
cell, a Rich ``Columns`` of pieces, cut each piece (``[default: extraction-eva…``).

Here a row has four or five cells: the ``--no-`` names are stacked under the names, the
name columns never wrap, and the help is one text that wraps (folding a word longer than
the line rather than cutting it). In a group's command panel, a command's description is
one paragraph too: typer kept the line breaks of its docstring, so at 80 columns each
docstring line wrapped on its own (``... and a verdict per`` / ``metric, McNemar's ...``)."""

from __future__ import annotations

from typing import Any

from rich.columns import Columns
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

# typer's options row: [required mark,] long names, short names, --no- names, short --no-
# names, type, help
_TYPER_ROW = 6


def _stack(first: RenderableType, second: RenderableType) -> RenderableType:
    """``first`` above ``second`` in one cell (either may be empty)."""
    if not (isinstance(first, Text) and isinstance(second, Text)) or not second.plain:
        return first
    if not first.plain:
        return second
    return Text("\n").join([first, second])


def _one_text(help_cell: RenderableType) -> RenderableType:
    """typer's help cell (a ``Columns`` of texts) as one text that wraps and never cuts."""
    if isinstance(help_cell, Columns) and all(isinstance(r, Text) for r in help_cell.renderables):
        joined = Text(" ").join([r for r in help_cell.renderables if isinstance(r, Text)])
        joined.overflow = "fold"
        return joined
    return help_cell


def _one_paragraph(text: Text) -> Text:
    """A command's description with its docstring's line breaks made spaces."""
    if "\n" not in text.plain:
        return text
    joined = Text(" ").join(line for line in text.split("\n") if line.plain.strip())
    joined.overflow = "fold"
    return joined


class _OptionsTable(Table):
    """Typer's option table, rows folded as the module says."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        if len(renderables) == 2 and all(isinstance(r, Text) for r in renderables):
            name, description = renderables  # a group's commands panel: name, description
            super().add_row(name, _one_paragraph(description), **kwargs)
            return
        if len(renderables) not in (_TYPER_ROW, _TYPER_ROW + 1):
            super().add_row(*renderables, **kwargs)  # not an options row: as typer made it
            return
        required = list(renderables[:-_TYPER_ROW])
        long, short, no_long, no_short, kind, help_cell = renderables[-_TYPER_ROW:]
        row = [*required, _stack(long, no_long), _stack(short, no_short), kind]
        super().add_row(*row, _one_text(help_cell), **kwargs)
        for column in self.columns[:-2]:
            column.no_wrap = True  # names (and the required mark) whole, on their own lines
        for column in self.columns[-2:]:
            column.overflow = "fold"  # type and help: a long word folds, never cut


def keep_option_names_whole() -> None:
    """Make typer's rich help use the layout above (idempotent)."""
    import typer.rich_utils

    typer.rich_utils.Table = _OptionsTable  # type: ignore[attr-defined]
