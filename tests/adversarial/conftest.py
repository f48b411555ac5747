"""The adversarial suite: hostile input, hostile servers and crashes.

Each test records what it tried in the session tally, and asserts that it held; the tally is
printed at the end of the run so the suite's figures (inputs tried / held, faults injected /
items lost, secrets found in any output) are visible in every CI log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import pytest


@dataclass
class Tally:
    """Counts across the whole session (one instance, shared by every adversarial test)."""

    inputs_tried: int = 0
    inputs_held: int = 0
    faults_injected: int = 0
    items_lost: int = 0
    secrets_found: int = 0

    def input(self, held: bool) -> None:
        """One hostile input tried; held = handled as documented (clear error, nothing lost)."""
        self.inputs_tried += 1
        self.inputs_held += int(held)

    def faults(self, injected: int, lost: int) -> None:
        """Faults injected into one run and the items that run lost (rows missing)."""
        self.faults_injected += injected
        self.items_lost += lost

    def secrets(self, found: int) -> None:
        """Secret values found in an output (store, logs, exports, report, LangFuse body)."""
        self.secrets_found += found


_TALLY = Tally()


@pytest.fixture
def tally() -> Tally:
    return _TALLY


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist each worker process has its own tally: it is handed to the
    controller (``workeroutput``), which adds them up before printing."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["adversarial_tally"] = asdict(_TALLY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: a worker's tally added to the session's."""
    found = getattr(node, "workeroutput", {}).get("adversarial_tally") or {}
    for f in fields(Tally):
        setattr(_TALLY, f.name, getattr(_TALLY, f.name) + int(found.get(f.name, 0)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    t = _TALLY
    if not (t.inputs_tried or t.faults_injected or t.secrets_found):
        return
    terminalreporter.write_line(
        f"adversarial: inputs tried {t.inputs_tried} / held {t.inputs_held}; "
        f"faults injected {t.faults_injected} / items lost {t.items_lost}; "
        f"secrets found in outputs {t.secrets_found}"
    )
