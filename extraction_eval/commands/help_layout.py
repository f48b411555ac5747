"""Option names whole in ``--help`` at any width: typer's option panel is a Rich table whose
name columns may wrap, so at 80 columns Rich cut long names (``--min-gold-confide…``). Here
the name columns never wrap: the type and help columns give up the width instead, and fold a
long word rather than cut it."""

from __future__ import annotations

from typing import Any

from rich.table import Table

# an options row: [required mark,] long names, short names, --no- names, short --no- names,
# type, help; the last two columns (type and help) may wrap
_WRAPPING_COLUMNS = 2
_OPTIONS_ROW_MIN = 6


class _OptionsTable(Table):
    """Typer's option table, with the option-name columns set to ``no_wrap``."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*renderables, **kwargs)
        if len(self.columns) >= _OPTIONS_ROW_MIN:
            for column in self.columns[:-_WRAPPING_COLUMNS]:
                column.no_wrap = True
            for column in self.columns[-_WRAPPING_COLUMNS:]:
                column.overflow = "fold"  # a long word folds onto the next line, not cut


def keep_option_names_whole() -> None:
    """Make typer's rich help lay option names out unwrapped and uncut (idempotent)."""
    import typer.rich_utils

    typer.rich_utils.Table = _OptionsTable  # type: ignore[attr-defined]
