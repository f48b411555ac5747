"""The counting pass of a paired comparison, fed one pair of stored rows at a time.

``compare`` feeds it both runs read by item id (:func:`count_stored_pairs`); the HTML report, which
reads both runs' rows item by item anyway, feeds it the same rows as it goes, so a two-run
report does not read and decode both runs a second time. Stored counts are used where they
were made as this comparison scores (A's settings, A's gold), the other pairs are re-scored;
the accumulator's figures do not depend on the order the pairs come in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from extraction_eval.analysis.compare.item_diff import diff_changed_item
from extraction_eval.analysis.compare.run_diff import DiffFold
from extraction_eval.analysis.stored import in_both_runs
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import GoldView, ItemScore, ScoringConfig, score_dataset_item
from extraction_eval.evaluators.counts import StoredCounts, counts_key, decode_counts, item_row
from extraction_eval.evaluators.diff import FollowedRun, follow
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.stats.paired_delta import PairedAccumulator
from extraction_eval.types import DatasetItem, Extraction


@dataclass
class PairedCounts:
    """Two runs' count rows on the items both have, and the ids that could not be paired."""

    accumulator: PairedAccumulator
    only_in_a: list[str]
    only_in_b: list[str]
    not_in_gold: list[str]


class StoredRow(NamedTuple):
    """One stored result as the pass reads it."""

    pred: str | None  # the stored output JSON; None when the item errored
    schema_failure: bool
    counts: str | None

    @classmethod
    def of(
        cls, output: str | None, error: str | None, error_kind: str | None, counts: str | None
    ) -> StoredRow:
        failed = error is not None or output is None
        return cls(None if failed else output, error_kind == "schema", counts)


def stored_rows(store: LocalStore, run: RunRecord) -> Iterator[tuple[str, StoredRow]]:
    for item_id, output, error, error_kind, counts in store.iter_compare_rows(run.id):
        yield item_id, StoredRow.of(output, error, error_kind, counts)


def _valid(
    row: StoredRow, key: str, memo: dict[str, StoredCounts | None] | None = None
) -> StoredCounts | None:
    """The row's stored counts when made with ``key`` and consistent with the row."""
    counts = decode_counts(row.counts, key, memo)
    if counts is None:
        return None
    if counts.failed != (row.pred is None) or counts.schema_failure != row.schema_failure:
        return None
    return counts


def _counted(score: ItemScore, schema_failure: bool) -> StoredCounts:
    return StoredCounts(
        item_row(score, schema_failure=schema_failure),
        score.entity_types,
        score.relationship_types,
    )


_GOLD_BATCH = 500
_MEMO_LIMIT = 50_000  # decoded count parts kept (a few MB); cleared when more
_Pending = tuple[str, StoredRow, StoredRow, StoredCounts | None, StoredCounts | None]


class PairedPass:
    """Pairs of stored rows in, :class:`PairedCounts` out (:meth:`add`, then :meth:`finish`):
    stored counts where valid, re-scoring elsewhere; with ``fold``, items whose outputs
    differ are diffed too (sharing the scores). The ids only one run has are the caller's to
    put in ``out.only_in_a`` / ``out.only_in_b``. ``scoring_b``: B counted with its own
    settings (``compare --as-recorded``, to compare scoring choices); None: with ``scoring``."""

    def __init__(
        self,
        store: LocalStore,
        a: RunRecord,
        b: RunRecord,
        scoring: ScoringConfig,
        fold: DiffFold | None,
        *,
        from_dataset: bool = False,
        scoring_b: ScoringConfig | None = None,
    ) -> None:
        self.store, self.a, self.scoring, self.fold = store, a, scoring, fold
        self.scoring_b = scoring if scoring_b is None else scoring_b
        # ``from_dataset``: the caller feeds only items of A's dataset version (the report
        # streams them from it), so the 100,000 ids are not read and held to check it
        self.in_gold = (
            None if from_dataset else set(store.item_ids(a.dataset, version=a.dataset_version))
        )
        self.view = GoldView.of_run(a.config)  # A's schema and gold floor, as A's settings
        self.key = counts_key(scoring, self.view.floor, self.view.schemas_key())
        self.key_b = counts_key(self.scoring_b, self.view.floor, self.view.schemas_key())
        self.alike = self.key_b == self.key  # both sides counted with the same settings
        self.b_same_gold = (b.backend, b.dataset, b.dataset_version) == (
            a.backend,
            a.dataset,
            a.dataset_version,
        )
        self.share = fold is not None and fold.out.config == scoring and self.alike
        self.out = PairedCounts(PairedAccumulator(), [], [], [])
        self.pending: list[_Pending] = []
        self.memo: dict[str, StoredCounts | None] = {}  # count part -> decoded, shared

    def add(self, item_id: str, x: StoredRow, y: StoredRow) -> None:
        """One item both runs have: A's row ``x`` and B's row ``y``."""
        if len(self.memo) > _MEMO_LIMIT:
            self.memo.clear()
        if self.in_gold is not None and item_id not in self.in_gold:
            self.out.not_in_gold.append(item_id)
            return
        ca = _valid(x, self.key, self.memo)
        cb = _valid(y, self.key_b, self.memo) if self.b_same_gold else None
        same_output = x.pred == y.pred and x.schema_failure == y.schema_failure
        if cb is None and ca is not None and self.b_same_gold and same_output and self.alike:
            cb = ca  # the same stored output on the same gold, scored alike: the same counts
        fold = self.fold
        if ca is not None and cb is not None and (fold is None or x.pred == y.pred):
            self.out.accumulator.add_counts(ca, cb)
            if fold is not None:
                fold.unchanged(gold_empty=ca.gold_empty, failed=x.pred is None)
            return
        self.pending.append((item_id, x, y, ca, cb))
        if len(self.pending) >= _GOLD_BATCH:
            self._settle_pending()

    def finish(self) -> PairedCounts:
        if self.pending:
            self._settle_pending()
        return self.out

    def _settle_pending(self) -> None:
        a = self.a
        ids = [p[0] for p in self.pending]
        items = self.store.get_items_by_ids(a.dataset, ids, version=a.dataset_version)
        for item_id, x, y, ca, cb in self.pending:
            self._settle(self.view.item(items[item_id]), x, y, ca, cb)
        self.pending.clear()

    def _settle(
        self,
        item: DatasetItem,
        x: StoredRow,
        y: StoredRow,
        ca: StoredCounts | None,
        cb: StoredCounts | None,
    ) -> None:
        fold, scoring = self.fold, self.scoring

        def scored(pred: Extraction | None, config: ScoringConfig = scoring) -> ItemScore:
            return score_dataset_item(item, pred, config)

        same = x.pred == y.pred
        pa = None if x.pred is None else Extraction.model_validate_json(x.pred)
        pb = pa if same else (None if y.pred is None else Extraction.model_validate_json(y.pred))
        changed = fold is not None and not same and pa != pb
        score_a = score_b = None
        if ca is None or cb is None:
            score_a = scored(pa)
            # the same stored output (both canonical JSON) scores the same: once is enough
            score_b = score_a if same and self.alike else scored(pb, self.scoring_b)
            ca = ca or _counted(score_a, x.schema_failure)
            cb = cb or _counted(score_b, y.schema_failure)
        self.out.accumulator.add_counts(ca, cb)
        if fold is None:
            return
        if not changed:
            gold = item.expected
            fold.unchanged(
                gold_empty=not gold.entities and not gold.relationships, failed=pa is None
            )
            return
        gold = scored_gold(item)
        views: tuple[FollowedRun | None, FollowedRun | None] = (None, None)
        if self.share:  # the stored views (or the scores just made) fit the diff's config
            if score_a is not None and score_b is not None:
                views = (follow(score_a), follow(score_b))
            else:
                n_e, n_r = len(gold.entities), len(gold.relationships)
                views = (ca.followed_run(n_e, n_r), cb.followed_run(n_e, n_r))
        fold.changed(diff_changed_item(item, gold, pa, pb, fold.out.config, views))


def count_stored_pairs(
    store: LocalStore,
    a: RunRecord,
    b: RunRecord,
    scoring: ScoringConfig,
    fold: DiffFold | None,
    scoring_b: ScoringConfig | None = None,
) -> PairedCounts:
    """Both runs' stored rows read once by item id into a :class:`PairedPass` (local runs of
    a numbered dataset version: their stored counts are used where they fit)."""
    counting = PairedPass(store, a, b, scoring, fold, scoring_b=scoring_b)
    out = counting.out
    for item_id, x, y in in_both_runs(
        stored_rows(store, a), stored_rows(store, b), out.only_in_a, out.only_in_b
    ):
        counting.add(item_id, x, y)
    return counting.finish()


_Side = tuple[str | None, bool]


def _outputs(store: LocalStore, run: RunRecord) -> Iterator[tuple[str, _Side]]:
    """(item id, (stored output JSON or None when the item errored, schema failure)) by id."""
    for item_id, output, error, error_kind in store.iter_outputs(run.id):
        failed = error is not None or output is None
        yield item_id, (None if failed else output, error_kind == "schema")


def rescore_pairs(
    store: LocalStore,
    a: RunRecord,
    b: RunRecord,
    items: Mapping[str, DatasetItem],
    scoring: ScoringConfig,
    scoring_b: ScoringConfig | None = None,
) -> PairedCounts:
    """Stream both runs' stored outputs by item id and re-score each paired item against
    ``items`` (errored: an empty prediction that never passes); keeps count rows only. For
    gold from elsewhere (LangFuse, a caller's loader), where stored counts cannot be trusted.
    ``scoring_b``: B scored with its own settings (None: with ``scoring``)."""
    alike = scoring_b is None or scoring_b == scoring
    out = PairedCounts(PairedAccumulator(), [], [], [])
    pairs = in_both_runs(_outputs(store, a), _outputs(store, b), out.only_in_a, out.only_in_b)
    for item_id, x, y in pairs:
        item = items.get(item_id)
        if item is None:
            out.not_in_gold.append(item_id)
            continue

        def scored(
            output: str | None, item: DatasetItem = item, config: ScoringConfig = scoring
        ) -> ItemScore:
            pred = None if output is None else Extraction.model_validate_json(output)
            return score_dataset_item(item, pred, config)

        score_a = scored(x[0])
        # the same stored output (both canonical JSON) scores the same: once is enough
        same = x[0] == y[0] and alike
        score_b = score_a if same else scored(y[0], config=scoring_b or scoring)
        out.accumulator.add(score_a, score_b, a_schema_failure=x[1], b_schema_failure=y[1])
    return out
