"""A ``--pipeline`` whose import is slow in a worker process (any process but the one whose
id is in ``E2E_RUN_PID``): ``E2E_WORKER_SETUP_S`` seconds, or for ever (a worker stuck in its
setup). ``E2E_PID_LOG`` gets "item id, process id" per call (which process ran it)."""

from __future__ import annotations

import os
import time
from typing import Any

if os.environ.get("E2E_RUN_PID") not in (None, str(os.getpid())):
    _until = time.monotonic() + float(os.environ.get("E2E_WORKER_SETUP_S") or "inf")
    while time.monotonic() < _until:  # as an import waiting on a lock or a host would
        time.sleep(min(1.0, max(_until - time.monotonic(), 0.0)))


def first_entity(*, item: Any, **_: Any) -> dict[str, Any]:
    """The item's first gold entity."""
    path = os.environ.get("E2E_PID_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fp:
            fp.write(f"{item.id} {os.getpid()}\n")
    ents = item.expected.entities[:1]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}
