"""A ``--pipeline`` that takes its worker process down on chosen items: ``E2E_DIE`` is a JSON
object {item id: why}; in any process but the one whose id is in ``E2E_RUN_PID`` (the run's),
such an item writes its ``why`` to stderr and exits at once (status 3), as a worker killed by
a native crash or the OOM killer would. Otherwise the item's first gold entity."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def first_entity(*, item: Any, **_: Any) -> dict[str, Any]:
    why = json.loads(os.environ.get("E2E_DIE") or "{}").get(item.id)
    if why and os.environ.get("E2E_RUN_PID") != str(os.getpid()):
        sys.stderr.write(f"{why}\n")
        sys.stderr.flush()
        os._exit(3)
    ents = item.expected.entities[:1]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}
