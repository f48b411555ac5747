"""What every command shares: consoles and turning domain errors into one line + exit code."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from extraction_eval.errors import ExtractionEvalError

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Domain errors become ``error: <one line>`` and their exit code; no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ExtractionEvalError as exc:
            fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted; what finished is saved (runs: continue with --resume)", 130)

    return wrapper
