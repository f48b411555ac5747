"""Command line: a thin layer over the Python API. Each command parses, calls, renders."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)


def main() -> None:
    app()


def run_experiment_main() -> None:
    raise SystemExit("not yet")


def seed_from_trace_main() -> None:
    raise SystemExit("not yet")
