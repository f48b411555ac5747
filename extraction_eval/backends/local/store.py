"""``LocalStore``: the table families put together over one connection, plus sample seeding.

Each family (``datasets``, ``runs`` and its ``pages``, ``prompts``, ``cache``, ``gold``,
``batches``) is a mixin over the one ``StoreConnection`` (``connection``), so call sites keep
one object: ``store.results(run_id)``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from extraction_eval.backends.local.batches import BatchTables
from extraction_eval.backends.local.cache import CacheTables
from extraction_eval.backends.local.datasets import DatasetTables, _dataset_row
from extraction_eval.backends.local.gold import GoldTables
from extraction_eval.backends.local.judge import JudgeTables
from extraction_eval.backends.local.locks import LockTables
from extraction_eval.backends.local.pages import ResultPages
from extraction_eval.backends.local.prompts import PromptTables
from extraction_eval.backends.local.report_rows import ReportRowTables

__all__ = ["SAMPLE_DATASET", "LocalStore", "default_home", "default_store_path"]

log = logging.getLogger(__name__)

HOME_ENV = "EXTRACTION_EVAL_HOME"
SAMPLE_DATASET = "extraction-eval"
_SAMPLE_RESOURCE = ("data", "sample_dataset.jsonl")


def default_home() -> Path:
    """``$EXTRACTION_EVAL_HOME``, else ``~/.extraction-eval`` (tests point the variable at tmp)."""
    env = os.environ.get(HOME_ENV, "").strip()
    return Path(env).expanduser() if env else Path.home() / ".extraction-eval"


def default_store_path() -> Path:
    return default_home() / "store.db"


class LocalStore(
    DatasetTables,
    ResultPages,
    ReportRowTables,
    PromptTables,
    CacheTables,
    GoldTables,
    JudgeTables,
    BatchTables,
    LockTables,
):
    """Datasets (versioned), runs, item results, scores and the response cache in SQLite.

    One connection shared behind a lock: the runner records results from worker threads, and
    SQLite serialises writers anyway. Opening migrates the schema and, unless ``seed=False``,
    adds the bundled sample dataset ``extraction-eval`` if it is absent.
    """

    def __init__(self, path: Path | None = None, *, seed: bool = True) -> None:
        super().__init__(Path(path) if path is not None else default_store_path())
        if seed:
            self._seed_sample()

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalStore({str(self._path)!r})"

    def _seed_sample(self) -> None:
        """Make the README's first command work on a fresh machine; never overwrite a user's."""
        with self._tx(write=False) as conn:
            if _dataset_row(conn, SAMPLE_DATASET) is not None:
                return
        from extraction_eval.datasets.bundled import sample_items  # imported only when seeding

        items = sample_items()
        self.upload_items(
            SAMPLE_DATASET,
            items,
            description="Bundled sample (our own writing): people, organisations, places, dates",
            metadata={"source": "bundled", "file": "/".join(_SAMPLE_RESOURCE)},
        )
