"""``LocalStore``: the table families put together over one connection, plus the bundled sample
dataset.

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
from extraction_eval.backends.local.reviews import ReviewTables

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
    ReviewTables,
):
    """Datasets (versioned), runs, item results, scores and the response cache in SQLite.

    One connection shared behind a lock: the runner records results from worker threads, and
    SQLite serialises writers anyway. Opening migrates the schema and, unless
    ``sample=False``, adds the bundled sample dataset ``extraction-eval`` if it is absent.
    ``seed`` is the old name of ``sample`` ("seed" is also the bootstrap's seed and the
    ``seeds`` package), still accepted. ``read_only=True`` (a ``runs merge --from`` store)
    writes nothing, not even a side file: a store this version made, or one line saying why
    not (``NotAStoreError``).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        sample: bool = True,
        seed: bool | None = None,
        read_only: bool = False,
    ) -> None:
        super().__init__(
            Path(path) if path is not None else default_store_path(), read_only=read_only
        )
        if (sample if seed is None else seed) and not read_only:
            self._add_sample()

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalStore({str(self._path)!r})"

    def _add_sample(self) -> None:
        """Make the README's first command work on a fresh machine; never overwrite a user's."""
        with self._tx(write=False) as conn:
            if _dataset_row(conn, SAMPLE_DATASET) is not None:
                return
        from extraction_eval.datasets.bundled import sample_items  # imported only when adding it

        items = sample_items()
        self.upload_items(
            SAMPLE_DATASET,
            items,
            description="Bundled sample (our own writing): people, organisations, places, dates",
            metadata={"source": "bundled", "file": "/".join(_SAMPLE_RESOURCE)},
        )
