"""Values that would become unbounded work are refused before any work: one line, exit 2,
nothing created (``--repeats 100000000``, ``LANGFUSE_TIMEOUT=abc``, deep or huge TOML)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.tally import Tally

runner = CliRunner()


def _deep(tmp: Path) -> Path:
    path = tmp / "deep.toml"
    path.write_text("model = " + "[" * 100_000 + "]" * 100_000 + "\n")
    return path


def _nested(tmp: Path) -> Path:  # under the recursion limit, over the depth bound
    path = tmp / "nested.toml"
    path.write_text("model = " + "[" * 40 + '"offline:baseline"' + "]" * 40 + "\n")
    return path


def _huge(tmp: Path) -> Path:
    path = tmp / "huge.toml"
    path.write_text('model = ["offline:baseline"]\n' + "# padding\n" * 200_000)
    return path


CASES: dict[str, tuple[Callable[[Path], list[str]], dict[str, str], str]] = {
    "repeats 1e8": (
        lambda t: ["matrix", "--model", "offline:baseline", "--repeats", "100000000"],
        {},
        "--repeats must be at most 100",
    ),
    "gold runs 1e8": (
        lambda t: ["gold", "build", "--models", "offline:baseline:100000000", "--dry-run"],
        {},
        "at most 100",
    ),
    "concurrency 1e9": (
        lambda t: ["run", "--concurrency", "1000000000"],
        {},
        "--concurrency must be at most 10,000",
    ),
    "max attempts 1e9": (
        lambda t: ["run", "--max-attempts", "1000000000"],
        {},
        "--max-attempts must be at most 100",
    ),
    "LANGFUSE_TIMEOUT=abc": (
        lambda t: ["run", "--limit", "1"],
        {"LANGFUSE_TIMEOUT": "abc"},
        "LANGFUSE_TIMEOUT must be a whole number from 1 to 600, got 'abc'",
    ),
    "LANGFUSE_FLUSH_INTERVAL=nan": (
        lambda t: ["run", "--limit", "1"],
        {"LANGFUSE_FLUSH_INTERVAL": "nan"},
        "LANGFUSE_FLUSH_INTERVAL must be a number",
    ),
    "matrix deep TOML": (
        lambda t: ["matrix", "--config", str(_deep(t))],
        {},
        "nested deeper than 32 levels",
    ),
    "matrix nested TOML": (
        lambda t: ["matrix", "--config", str(_nested(t))],
        {},
        "nested deeper than 32 levels",
    ),
    "matrix huge TOML": (
        lambda t: ["matrix", "--config", str(_huge(t))],
        {},
        "a config file may have 1,000,000",
    ),
    "gold deep TOML": (
        lambda t: ["gold", "build", "--config", str(_deep(t)), "--dry-run"],
        {},
        "nested deeper than 32 levels",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unbounded_value_is_refused_in_one_line_before_any_work(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    make_args, env, expected = CASES[case]
    if env:  # LangFuse mode, so the SDK's own variables are read
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-values")
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-values")
        monkeypatch.setenv("LANGFUSE_BASE_URL", "http://127.0.0.1:9")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
    result = runner.invoke(app, make_args(tmp_path))
    lines = result.output.strip().splitlines()
    held = result.exit_code == 2 and len(lines) == 1 and expected in result.output
    tally.input(held=held)
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and expected in lines[0], result.output
    assert LocalStore().list_runs() == []  # nothing was created
