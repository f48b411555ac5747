"""``--out`` that names the local store (or its -wal/-shm, or a link to them) is refused before
any work: writing there would destroy every dataset and run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "export", "r", "--out"],
        ["datasets", "export", "extraction-eval", "--out"],
        ["report", "r", "--out"],
        ["score", "--out"],
    ],
)
@pytest.mark.parametrize("target", ["store.db", "store.db-wal", "store.db-shm", "link"])
def test_out_naming_the_store_is_refused_and_the_store_is_untouched(
    command: list[str], target: str, isolated_home: Path, tmp_path: Path
) -> None:
    assert runner.invoke(app, ["run", "--name", "r", "--limit", "2"]).exit_code == 0
    store = LocalStore()  # held open: the -wal and -shm files exist
    path = isolated_home / target
    if target == "link":
        path = tmp_path / "innocent.jsonl"
        path.symlink_to(isolated_home / "store.db")
    before = hashlib.sha256((isolated_home / "store.db").read_bytes()).hexdigest()
    result = runner.invoke(app, [*command, str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: --out {path}: cannot write: that is the local store (writing there would"
        " destroy it)\n"
    )
    assert hashlib.sha256((isolated_home / "store.db").read_bytes()).hexdigest() == before
    assert store.get_run("r", "extraction-eval") is not None
    store.close()
