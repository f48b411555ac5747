"""``.env`` is read from the current folder only, never from a parent folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from extraction_eval.cli import load_env

MARK = "EXTRACTION_EVAL_TEST_DOTENV_MARK"


def test_a_dotenv_in_a_parent_folder_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MARK, raising=False)  # restored (absent) after the test
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (tmp_path / ".env").write_text(f"{MARK}=parent\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    child = tmp_path / "project"
    child.mkdir()
    monkeypatch.chdir(child)
    load_env()
    assert MARK not in os.environ and "OPENAI_BASE_URL" not in os.environ


def test_the_current_folder_dotenv_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MARK, raising=False)
    (tmp_path / ".env").write_text(f"{MARK}=here\n")
    monkeypatch.chdir(tmp_path)
    load_env()
    assert os.environ[MARK] == "here"
