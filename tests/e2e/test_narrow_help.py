"""Every command's ``--help`` at 80 columns shows every option name and every help text
whole (issue "80 columns": typer's option panel cut ``--min-gold-confidence`` to
``--min-gold-confide…``, and help texts to ``[default: extraction-eva…``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
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
