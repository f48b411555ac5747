"""The fake provider's call log, read back by tests (the provider writes one JSON line per
call when ``EXTRACTION_EVAL_FAKE_LOG`` is set, from any process of the run)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_fake_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The calls logged through ``EXTRACTION_EVAL_FAKE_LOG`` (for subprocess tests)."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]
