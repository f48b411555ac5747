"""One ``--format`` vocabulary for what a command prints (issue 26): ``table | json`` on every
command that prints results (``score`` always spelled it so), ``text`` still accepted as the old
name of ``table`` with a note on stderr, anything else one line and exit 2."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.cli import _run_app, app

runner = CliRunner()
# every command whose --format chooses between a view for people and JSON
PRINTING = (("compare",), ("power",), ("gold", "review"), ("score",))


def _format_option(path: tuple[str, ...]) -> Any:
    """The command's ``--format`` parameter (typer's click objects, by duck typing)."""
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    (option,) = [p for p in command.params if "--format" in getattr(p, "opts", ())]
    return option


@pytest.mark.parametrize("path", PRINTING, ids=" ".join)
def test_every_printing_command_defaults_to_table(path: tuple[str, ...]) -> None:
    option = _format_option(path)
    assert option.default == "table"
    assert "table" in (option.help or "") and "json" in (option.help or "")


@pytest.fixture
def base_run() -> None:
    result = runner.invoke(_run_app, ["--name", "base"])
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    "argv", [["compare", "base", "base"], ["power", "--baseline", "base"]], ids=lambda a: a[0]
)
def test_text_is_table_with_a_note_and_json_is_json(base_run: None, argv: list[str]) -> None:
    table = runner.invoke(app, [*argv, "--format", "table"])
    assert table.exit_code == 0, table.stderr
    assert "note:" not in table.stderr
    old = runner.invoke(app, [*argv, "--format", "text"])
    assert old.exit_code == 0, old.stderr
    assert old.stdout == table.stdout
    assert "--format text is now --format table" in old.stderr
    as_json = runner.invoke(app, [*argv, "--format", "json"])
    assert as_json.exit_code == 0, as_json.stderr
    assert isinstance(json.loads(as_json.stdout), dict)


def test_an_unknown_format_is_one_line_before_any_work() -> None:
    result = runner.invoke(app, ["power", "--baseline", "no-such-run", "--format", "yaml"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: --format must be table or json, got 'yaml'"]
