"""The adversarial suite: hostile input, hostile servers and crashes.

Each test records what it tried in the session tally (``tests/support/tally.py``), and asserts
that it held; the root conftest prints the tally at the end of the run (adding up the xdist
workers' counts), so the suite's figures (inputs tried / held, faults injected / items lost,
secrets found in any output) are visible in every CI log.
"""

from __future__ import annotations

import pytest

from tests.support.tally import TALLY, Tally


@pytest.fixture
def tally() -> Tally:
    return TALLY
