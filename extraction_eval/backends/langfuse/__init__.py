"""LangFuse adapters (being split into one module per concern)."""

from extraction_eval.backends.langfuse.datasets import *  # noqa: F403
from extraction_eval.backends.langfuse.datasets import (  # noqa: F401
    __all__,
    _order,
    _parse_version,
    api_errors,
    normalise_item,
)
