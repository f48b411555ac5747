"""HTML presentation of runs (``extraction-eval report``): one self-contained file.

Same layer as ``views`` (Rich presentation): renders what ``analysis.html_report.data`` returns.
jinja2 is imported here only, so the CLI does not load it at import time.
"""

from __future__ import annotations

import importlib
from typing import Any

from extraction_eval.errors import UsageError


def require(module: str) -> Any:
    """Import one of the report's packages (core dependencies), or say in one line how to get
    it back when an environment lost it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"the HTML report needs {module}, a dependency of extraction-eval: "
            "reinstall extraction-eval to restore it"
        ) from None
