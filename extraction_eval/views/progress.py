"""The run progress bar: done / errors / ETA on stderr, so stdout stays clean for data."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:
    from extraction_eval.types import ItemResult


class RichProgress:
    """Progress bar with done / errors / ETA, on stderr so stdout stays clean for data."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[errors]} errors"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._errors = 0

    def __enter__(self) -> RichProgress:
        return self  # the display starts with the run (``start``): a refused setup prints 1 line

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._progress.stop()

    def start(self, *, total: int, done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("items", total=total, completed=done, errors=0)

    def advance(self, result: ItemResult) -> None:
        if self._task is None:
            return
        if not result.ok:
            self._errors += 1
        self._progress.update(self._task, advance=1, errors=self._errors)
