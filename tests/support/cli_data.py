"""Small CLI steps the protocol tests share: a command that must succeed, and the first lines
of a shared-data file uploaded as a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from extraction_eval.cli import app


def ok(result: Any) -> str:
    """``result``'s stdout, after checking the command succeeded (its stderr shown if not)."""
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def upload_head(shared_data: Path, tmp_path: Path, source: str, n: int, name: str) -> Path:
    """The first ``n`` lines of ``shared_data/source`` uploaded as dataset ``name``."""
    lines = (shared_data / source).read_text(encoding="utf-8").splitlines()[:n]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ok(CliRunner().invoke(app, ["datasets", "upload", name, str(path)]))
    return path
