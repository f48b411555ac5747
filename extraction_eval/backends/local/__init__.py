"""The embedded local store: one SQLite file, one connection, tables grouped by family.

``store`` opens the connection (WAL, ``migrations``: named and append-only, the bundled
sample dataset) and puts the families together into ``LocalStore``: ``datasets`` (versioned
items), ``runs`` (runs, results, scores, failure taxonomy), ``prompts`` (versions and
labels), ``cache`` (model responses), ``gold`` (ensemble-gold overrides and votes).
"""

from extraction_eval.backends.base import DatasetInfo, RunRecord, UploadReport
from extraction_eval.backends.local.cache import SQLiteResponseCache
from extraction_eval.backends.local.compat import NotAStoreError
from extraction_eval.backends.local.rows import StoredValueError
from extraction_eval.backends.local.store import (
    SAMPLE_DATASET,
    LocalStore,
    default_home,
    default_store_path,
)

__all__ = [
    "SAMPLE_DATASET",
    "DatasetInfo",
    "LocalStore",
    "NotAStoreError",
    "RunRecord",
    "SQLiteResponseCache",
    "StoredValueError",
    "UploadReport",
    "default_home",
    "default_store_path",
]
