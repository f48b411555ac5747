"""Shared fixtures. Every test gets its own store home and no real-service credentials."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support.tally import TALLY

# A pytest-xdist worker starts with COLUMNS=80 and LINES=24 in its environment; Rich would
# then fix every module-level console's width when the package is imported, where a lone
# pytest process lets each test's own COLUMNS (CliRunner(env=...)) decide. Same rules in both.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

# CI runs the property tests on a fixed seed so a green build stays green; locally they
# explore new examples every run (and a failure found there becomes a named regression test).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Variables that would make a test talk to a real service; tests that need one set it.
_SERVICE_ENV = (
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_BASE_URL",
    "LANGFUSE_HOST",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point EXTRACTION_EVAL_HOME at a fresh temp dir and drop service credentials."""
    home = tmp_path / "ee-home"
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(home))
    for name in _SERVICE_ENV:
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """The CLI's entry points configure the process (``cli._startup``: the root handlers, the
    LangFuse SDK's logger at CRITICAL); no later test inherits that (a test that reads the
    SDK's own log records failed after any test that had called ``main``)."""
    root, sdk = logging.getLogger(), logging.getLogger("langfuse")
    handlers, root_level, sdk_level = list(root.handlers), root.level, sdk.level
    yield
    root.handlers[:] = handlers
    root.setLevel(root_level)
    sdk.setLevel(sdk_level)
    logging.captureWarnings(False)  # ``_startup`` routes warnings through logging


@pytest.fixture
def shared_data() -> Path:
    """../shared/data (or $EXTRACTION_EVAL_SHARED_DATA); the test is skipped when absent."""
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared gold data not found at {path}")
    return path


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its adversarial tally to the controller (``workeroutput``)."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["adversarial_tally"] = TALLY.as_dict()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: a finished worker's tally added to the session's."""
    TALLY.add(getattr(node, "workeroutput", {}).get("adversarial_tally") or {})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    line = TALLY.line()
    if line is not None:
        terminalreporter.write_line(line)
