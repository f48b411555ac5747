"""Backends: the only code that talks to the local store or to LangFuse.

``get_dataset_backend()`` is the one place that decides where datasets live, so commands and
the runner never branch on the mode themselves.
"""

from __future__ import annotations

from extraction_eval.backends.base import DatasetBackend, DatasetInfo, RunRecord, UploadReport

__all__ = ["DatasetBackend", "DatasetInfo", "RunRecord", "UploadReport", "get_dataset_backend"]


def get_dataset_backend() -> DatasetBackend:
    """The dataset backend for this environment; for now always the local store.

    (LangFuse mode will return its backend here when LANGFUSE_* keys are set.)
    """
    from extraction_eval.backends.local import LocalStore  # sqlite only when used

    return LocalStore()
