"""ESC sequences and other control characters in ids, texts and errors never reach the
terminal: every view prints through one console that strips them."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.cli import app

runner = CliRunner()
ESC_ID = "evil-\x1b]0;owned\x07-\x1b[2J"
ESC_TEXT = "Ada \x1b[31mmet\x1b[0m Bob\x9b2J in Paris \u202eevil"


def _dataset(tmp: Path) -> Path:
    path = tmp / "hostile.jsonl"
    gold = {"entities": [{"name": "Ada", "type": "person"}]}
    lines = [
        {"id": ESC_ID, "text": ESC_TEXT, **gold},
        {"id": "plain", "text": "Bob met Ada.", **gold},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _clean(output: str) -> bool:
    return not any(c in output for c in ("\x1b", "\x07", "\x9b", "\u202e"))


def test_views_strip_control_characters_from_ids_and_texts(tmp_path: Path) -> None:
    upload = runner.invoke(app, ["datasets", "upload", "hostile", str(_dataset(tmp_path))])
    assert upload.exit_code == 0, upload.output
    shown = runner.invoke(app, ["datasets", "show", "hostile"])
    assert shown.exit_code == 0 and "evil-" in shown.output
    run = runner.invoke(app, ["run", "--dataset", "hostile", "--name", "esc"])
    assert run.exit_code == 0, run.output
    items = runner.invoke(app, ["runs", "show", "esc", "--worst"])
    assert items.exit_code == 0 and "evil-" in items.output, items.output
    for output in (upload.output, shown.output, run.output, items.output):
        assert _clean(output), repr(output)


def test_an_error_message_with_escapes_is_stripped_too(tmp_path: Path) -> None:
    # a user pipeline raising with an ESC sequence in its message: the item's error row
    module = tmp_path / "escaping.py"
    module.write_text(
        "def run(**_):\n    raise RuntimeError('boom \\x1b[2J\\x1b]0;owned\\x07 done')\n"
    )
    spec = f"{module}:run"
    run = runner.invoke(app, ["run", "--name", "esc-err", "--limit", "1", "--pipeline", spec])
    assert run.exit_code == 0, run.output
    shown = runner.invoke(app, ["runs", "show", "esc-err"])
    assert "boom" in shown.output, shown.output
    assert _clean(run.output + shown.output), repr(shown.output)
