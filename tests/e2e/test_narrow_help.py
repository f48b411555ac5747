"""Every command's ``--help`` at 80 columns shows every option name and every help text
whole (issue "80 columns": typer's option panel cut ``--min-gold-confidence`` to
``--min-gold-confide…``, and help texts to ``[default: extraction-eva…``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.cli import _run_app, _seed_app, app

runner = CliRunner()


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if hasattr(group, "commands"):  # a group (typer may vendor click: no isinstance)
        for name, command in group.commands.items():
            yield from _commands(command, (*path, name))


def _command_at(root: Any, path: tuple[str, ...]) -> Any:
    command = root
    for name in path:
        command = command.commands[name]
    return command


def _option_names(command: Any) -> list[str]:
    return [
        name
        for param in command.params
        if param.param_type_name == "option"
        for name in (*param.opts, *param.secondary_opts)
    ]


CASES = [
    (label, typer_app, path)
    for label, typer_app in (
        ("extraction-eval", app),
        ("run-experiment", _run_app),
        ("seed-from-trace", _seed_app),
    )
    for path in _commands(typer.main.get_command(typer_app))
]


@pytest.mark.parametrize(
    ("typer_app", "path"),
    [(a, p) for _, a, p in CASES],
    ids=[" ".join((label, *p)) for label, _, p in CASES],
)
def test_every_option_name_is_whole_in_help_at_80_columns(
    typer_app: typer.Typer, path: tuple[str, ...]
) -> None:
    command = _command_at(typer.main.get_command(typer_app), path)
    result = runner.invoke(typer_app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80  # the width was honoured
    for name in _option_names(command):
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-]|…)", result.output), name
    # nor is any help text cut: every "…" printed is one the help texts hold themselves
    # (before, "[default: extraction-eva…" and "OpenAI-compati…")
    written = sum((p.help or "").count("…") for p in command.params) + (command.help or "").count(
        "…"
    )
    assert result.output.count("…") <= written, result.output


GROUPS = [
    (label, a, p)
    for label, a, p in CASES
    if hasattr(_command_at(typer.main.get_command(a), p), "commands")
]


def _panel_rows(output: str) -> list[tuple[str, str]]:
    """(name cell, description cell) of each line of the Commands panel."""
    rows, inside = [], False
    for line in output.splitlines():
        if line.startswith("╭─ Commands"):
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside and line.startswith("│"):
            body = line[1:-1]
            name = body[: body.index(" ", 1)].strip() if body.strip() else ""
            rows.append((name, body))
    return rows


@pytest.mark.parametrize(
    ("typer_app", "path"),
    [(a, p) for _, a, p in GROUPS],
    ids=[" ".join((label, *p)) for label, _, p in GROUPS],
)
def test_command_descriptions_wrap_as_one_paragraph_at_80_columns(
    typer_app: typer.Typer, path: tuple[str, ...]
) -> None:
    """A description line ends only where the next word would not fit: typer kept the line
    breaks of each docstring, so ``compare`` read "... and a verdict per" / "metric, ...".
    """
    result = runner.invoke(typer_app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    rows = _panel_rows(result.output)
    assert rows, result.output
    first = rows[0][1]
    start = len(first) - len(first.lstrip()[len(rows[0][0]) :].lstrip())  # the text column
    width = len(first) - start - 1  # one space of padding before the border
    for (_, body), (next_name, next_body) in pairwise(rows):
        if next_name:  # the next command starts: this description may end short
            continue
        text, following = body[start:].rstrip(), next_body[start:].split()
        assert following, result.output
        assert len(text) + 1 + len(following[0]) > width, f"{text!r} then {following[0]!r}"
