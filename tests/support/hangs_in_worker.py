"""A ``--pipeline`` whose import never ends in a worker process (any process but the one
whose id is in ``E2E_RUN_PID``): a worker stuck in its setup, for the pool's start-up bound."""

from __future__ import annotations

import os
import time
from typing import Any

if os.environ.get("E2E_RUN_PID") not in (None, str(os.getpid())):
    while True:  # as an import waiting on a lock or an unreachable host would
        time.sleep(60)


def first_entity(*, item: Any, **_: Any) -> dict[str, Any]:
    """The item's first gold entity (the run's own process runs the items)."""
    ents = item.expected.entities[:1]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}
