"""Backends: the only code that talks to the local store or to LangFuse.

``get_dataset_backend()`` is the one place that decides where datasets live, so commands and
the runner never branch on the mode themselves.
"""

from __future__ import annotations

from extraction_eval.backends.base import DatasetBackend, DatasetInfo, RunRecord, UploadReport

__all__ = ["DatasetBackend", "DatasetInfo", "RunRecord", "UploadReport", "get_dataset_backend"]


def get_dataset_backend() -> DatasetBackend:
    """LangFuse when its keys are configured, otherwise the local SQLite store."""
    from extraction_eval.backends.langfuse import LangfuseDatasetBackend, langfuse_configured

    if langfuse_configured():
        return LangfuseDatasetBackend.from_env()
    from extraction_eval.backends.local import LocalStore  # sqlite only when used

    return LocalStore()
