"""``compare A B`` fed along the HTML report's reading: the report reads both runs' rows item
by item anyway, so its counting pass (:class:`~.counting.PairedPass`) takes the same rows and
both runs are not read and decoded a second time. The result is :func:`~.runs.compare_runs`'s
(the report's figures are ``compare``'s)."""

from __future__ import annotations

from extraction_eval.analysis.compare.counting import PairedCounts, PairedPass, StoredRow
from extraction_eval.analysis.compare.runs import (
    CompareOptions,
    GoldLoader,
    RunComparison,
    _compare_counted,
    compare_runs,
)
from extraction_eval.analysis.stored import run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.backends.local.report_rows import ReportRow


class CompareAlong:
    """``compare A B`` for the report: its counting pass (:class:`PairedPass`) fed with the
    rows the report reads item by item anyway, so both runs are not read and decoded a second
    time. Only when the report streamed every result of both runs (``streamed``: local runs
    on one dataset version, and as many rows seen as each run has); otherwise, and for items
    from elsewhere (``gold``), compare reads the runs itself. compare's defaults (10,000
    resamples, seed 42): the figures ``compare A B`` prints."""

    def __init__(self, store: LocalStore, a: RunRecord, b: RunRecord, streamed: bool) -> None:
        self.store, self.a, self.b = store, a, b
        self.options = CompareOptions(force=True)
        self.counting = None
        if streamed:  # the report's items are A's dataset version's, streamed from it
            self.counting = PairedPass(store, a, b, run_scoring(a), None, from_dataset=True)
        self.seen = [0, 0]

    def add(self, item_id: str, ra: ReportRow | None, rb: ReportRow | None) -> None:
        """One item of the report: A's and B's rows (None: no result)."""
        if self.counting is None:
            return
        self.seen[0] += ra is not None
        self.seen[1] += rb is not None
        out = self.counting.out
        if ra is None or rb is None:
            if ra is not None or rb is not None:
                (out.only_in_a if rb is None else out.only_in_b).append(item_id)
            return
        self.counting.add(
            item_id,
            StoredRow.of(ra.output, ra.error, ra.error_kind, ra.counts),
            StoredRow.of(rb.output, rb.error, rb.error_kind, rb.counts),
        )

    def shipped(self) -> tuple[list[int], PairedCounts | None]:
        """What a worker process counted (its pending items settled), for :meth:`merge`."""
        return self.seen, None if self.counting is None else self.counting.finish()

    def merge(self, seen: list[int], paired: PairedCounts | None) -> None:
        """Add the counts of a worker's items (those after this one's)."""
        self.seen = [mine + theirs for mine, theirs in zip(self.seen, seen, strict=True)]
        if self.counting is None:
            return
        if paired is None:  # the worker could not pair its items: compare reads the runs
            self.seen[0] = -1
            return
        out = self.counting.finish()
        out.accumulator.extend(paired.accumulator)
        out.only_in_a += paired.only_in_a
        out.only_in_b += paired.only_in_b
        out.not_in_gold += paired.not_in_gold

    def result(self, gold: GoldLoader | None) -> RunComparison:
        a, b, store = self.a, self.b, self.store
        if self.counting is not None and self.seen == [
            store.count_results(a.id),
            store.count_results(b.id),
        ]:
            paired = self.counting.finish()
            paired.accumulator.sort_rows()  # no sorted copy beside them (40 MB at 100k)
            paired.only_in_a.sort()  # as compare lists them: by item id
            paired.only_in_b.sort()
            return _compare_counted(a, b, paired, self.options)
        return compare_runs(a, b, store=store, gold=gold, options=self.options)
