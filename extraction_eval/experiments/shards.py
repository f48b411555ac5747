"""One run made by N processes: fold the shard stores into one (``merge_runs``), then compute
the run-level scores once, from all items (``finalize_run``).

Each shard (``RunConfig(shard=Shard(i, N))``, see ``partition.py``) runs its items into its own
local store, and its run summary covers only those items. The run-level figures (micro
P/R/F1, bootstrap CIs, rates) are not sums of the shards' figures, so they are recomputed from
every item's stored result, by the same ``finalize`` a one-process run ends with: the merged
run's item and run scores equal a one-process run's exactly.

LangFuse mode works the same way: the shards write one experiment (same run name on the same
dataset: the SDK derives the same experiment id), each posting its own items' traces and
scores but no run-level scores; ``finalize_run`` on the merged store posts those once, on the
experiment. Finalize reads the merged local stores rather than LangFuse because LangFuse only
has what the micro figures and CIs cannot be rebuilt from: per-item ratios, not the tp / fp /
fn counts; re-scoring the traces' outputs instead would lose error kinds, tokens and cache
hits, and wait on LangFuse's ingestion delay and rate limits for every item.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.backends.local import LocalStore, NotAStoreError, RunRecord, StoredValueError
from extraction_eval.errors import InvalidValue, NotFoundError, UsageError
from extraction_eval.evaluators import ContextIndex, GoldView, ScoringConfig
from extraction_eval.experiments.partition import Shard, dataset_fingerprint
from extraction_eval.experiments.runner import Rescorer, RunOutcome, finalize, stored_results
from extraction_eval.types import DatasetItem, ItemResult

__all__ = [
    "MergeReport",
    "MergedSource",
    "MissingItems",
    "finalize_run",
    "merge_runs",
]

# Run-config keys that describe which part of the items a run holds, not how it ran: the
# only ones shards of one run may differ in.
_SHARD_KEYS = frozenset({"shard", "shards"})


class MissingItems(UsageError):
    """``finalize_run`` found items of the dataset version without a result (shards not
    merged yet); ``missing`` lists their ids."""

    def __init__(self, message: str, missing: Sequence[str]) -> None:
        super().__init__(message)
        self.missing = list(missing)


@dataclass(frozen=True)
class MergedSource:
    path: Path
    items: int
    shard: str | None  # "2/4", or None for a run that was not sharded


@dataclass
class MergeReport:
    run: RunRecord
    created: bool  # the run did not exist in this store before
    sources: list[MergedSource]
    items: int  # results the run has now
    shards: list[int] = field(default_factory=list)  # shard indices the run now holds
    shard_count: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Source:
    path: Path
    store: LocalStore
    run: RunRecord
    ids: list[str]


def _shards_of(run: RunRecord, label: str) -> tuple[int | None, set[int]]:
    """(shard count, shard indices) a run holds: one shard, a merged set, or (None, {}).
    A store edited by hand may record any JSON there: each index must be a whole number from
    1 to the count (``Shard``'s own check), else one line naming the store."""
    try:
        for key in ("shard", "shards"):
            if run.config.get(key) is not None:
                return _recorded_shards(run.config[key], key)
    except InvalidValue as exc:
        raise UsageError(f"{label}: run {run.name!r}: runs.config {exc}; nothing merged") from None
    return None, set()


def _recorded_shards(recorded: object, key: str) -> tuple[int, set[int]]:
    """A run config's ``shard`` or ``shards`` as (count, indices), each checked as a ``Shard``
    (whole numbers, count >= 1, index from 1 to the count)."""
    if not isinstance(recorded, dict):
        raise InvalidValue(f"config {key}", f"is not a JSON object, got {recorded!r}")
    indices = [recorded.get("index")] if key == "shard" else recorded.get("indices")
    if not isinstance(indices, list) or not indices:
        raise InvalidValue(f"config {key}", f"holds no shard index, got {recorded!r}")
    count: Any = recorded.get("count")  # ``Shard`` checks it is a whole number
    shards = [Shard(index, count) for index in indices]
    return shards[0].count, {s.index for s in shards}


def _shard_label(run: RunRecord) -> str | None:
    shard = run.config.get("shard")  # checked by ``_shards_of`` before
    return f"{shard['index']}/{shard['count']}" if isinstance(shard, dict) else None


def _differences(a: RunRecord, b: RunRecord) -> list[str]:
    """What differs between two runs besides their shard (empty: they can be merged)."""
    out: list[str] = []
    if a.dataset != b.dataset:
        out.append(f"dataset {b.dataset!r} vs {a.dataset!r}")
    if a.dataset_version != b.dataset_version:
        out.append(f"dataset version {b.dataset_version!r} vs {a.dataset_version!r}")
    if a.backend != b.backend:
        out.append(f"backend {b.backend} vs {a.backend}")
    if a.experiment_id and b.experiment_id and a.experiment_id != b.experiment_id:
        out.append(f"LangFuse experiment {b.experiment_id} vs {a.experiment_id}")
    keys = sorted((set(a.config) | set(b.config)) - _SHARD_KEYS)
    changed = [k for k in keys if a.config.get(k) != b.config.get(k)]
    if changed:
        out.append(f"config {', '.join(changed)}")
    return out


def _open_sources(store: LocalStore, paths: Sequence[Path | str]) -> list[tuple[Path, LocalStore]]:
    if not paths:
        raise InvalidValue("from", "needs at least one shard store to merge")
    seen: dict[Path, Path] = {store.path.resolve(): store.path}
    checked: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            problem = "is a directory" if path.is_dir() else "file not found"
            raise InvalidValue("from", f"{path}: {problem}")
        key = path.resolve()
        if key in seen:
            what = "is this store" if seen[key] == store.path else "is given twice"
            raise InvalidValue("from", f"{path}: {what}")
        seen[key] = path
        checked.append(path)
    out: list[tuple[Path, LocalStore]] = []
    try:
        for path in checked:  # read only: a merge never writes into the stores it reads
            out.append((path, LocalStore(path, seed=False, read_only=True)))
    except BaseException as exc:
        for _, opened in out:
            opened.close()
        if isinstance(exc, NotAStoreError):
            raise InvalidValue("from", f"{exc}; nothing merged") from None
        raise
    return out


@contextmanager
def _reading(path: Path, outcome: str = "nothing merged") -> Iterator[None]:
    """A value in the store at ``path`` that cannot be (a store edited by hand): one line
    naming the store, the run or item and the column."""
    try:
        yield
    except StoredValueError as exc:
        raise UsageError(f"{path}: {exc}; {outcome}") from None


def merge_runs(
    store: LocalStore,
    name: str,
    sources: Sequence[Path | str],
    *,
    dataset: str | None = None,
    take_over_lock: bool = False,
) -> MergeReport:
    """Fold run ``name`` of each store in ``sources`` (shard stores) into ``store``'s run of that
    name, creating it when only the sources have it. All or nothing, in one transaction.

    Refused (``UsageError``, one line naming the store and the problem, nothing written): a
    source without the run; a run whose dataset, dataset version, backend, LangFuse experiment
    or config (anything but the shard) differs; two runs holding the same shard, or shards of
    different counts; an item in two of the runs (this store's included); this store's run
    being run right now by another process (``InvalidValue`` on ``take_over_lock``, as a
    second run is refused).
    """
    opened = _open_sources(store, sources)
    try:
        return _merge(store, name, opened, dataset, take_over_lock)
    finally:
        for _, source in opened:
            source.close()


def _merge(
    store: LocalStore,
    name: str,
    opened: list[tuple[Path, LocalStore]],
    dataset: str | None,
    take_over_lock: bool,
) -> MergeReport:
    found: list[_Source] = []
    for path, source in opened:
        with _reading(path):
            run = source.get_run(name, dataset)
        if run is None:
            where = f" on dataset {dataset!r}" if dataset else ""
            raise NotFoundError(f"{path}: no run named {name!r}{where}")
        found.append(_Source(path, source, run, source.result_ids(run.id)))
    with _reading(store.path):
        target = store.get_run(name, found[0].run.dataset)
    parts: list[tuple[str, RunRecord, list[str]]] = []
    if target is not None:
        parts.append((f"this store ({store.path})", target, store.result_ids(target.id)))
    parts += [(str(s.path), s.run, s.ids) for s in found]

    reference_label, reference, _ = parts[0]
    for label, run, _ids in parts[1:]:
        diff = _differences(reference, run)
        if diff:
            raise UsageError(
                f"{label}: run {name!r} does not match the one in {reference_label}:"
                f" {'; '.join(diff)} differ; nothing merged"
            )

    count: int | None = None
    holder: dict[int, str] = {}
    for label, run, _ids in parts:
        run_count, indices = _shards_of(run, label)
        if run_count is None:
            continue
        if count is not None and run_count != count:
            raise UsageError(
                f"{label}: run {name!r} holds shards of {run_count}, the others of {count};"
                " nothing merged"
            )
        count = run_count
        for index in sorted(indices):
            if index in holder:
                raise UsageError(
                    f"shard {index}/{count} of run {name!r} is in both {holder[index]} and"
                    f" {label}; nothing merged"
                )
            holder[index] = label
    if count is not None and any(_shards_of(run, lb)[0] is None for lb, run, _ in parts):
        raise UsageError(
            f"run {name!r}: some of the stores hold a shard, others a run that was not sharded;"
            " nothing merged"
        )

    owner: dict[str, str] = {}
    for label, _run, ids in parts:
        for item_id in ids:
            if item_id in owner:
                raise UsageError(
                    f"item {item_id!r} of run {name!r} is in both {owner[item_id]} and {label}"
                    " (overlapping shards); nothing merged"
                )
            owner[item_id] = label

    config: dict[str, Any] = {k: v for k, v in reference.config.items() if k not in _SHARD_KEYS}
    if count is not None:
        config["shards"] = {"count": count, "indices": sorted(holder)}
    experiment_id = next((run.experiment_id for _, run, _ in parts if run.experiment_id), None)

    def results() -> Iterator[ItemResult]:
        for s in found:
            with _reading(s.path):  # a key here may have been none where a shard ran
                yield from (r.redacted() for r in s.store.iter_results(s.run.id))

    def merge() -> RunRecord:
        return store.merge_results(
            name=name,
            dataset=reference.dataset,
            dataset_version=reference.dataset_version,
            config=config,
            backend=reference.backend,
            experiment_id=experiment_id,
            results=results(),
        )

    notes: list[str] = []
    if target is None:
        run = merge()  # created in merge's own transaction: nobody can be running it
    else:  # a process resuming this store's run would write beside the merge
        lock = store.holding_run_lock(target.id, name, doing="merge into", take_over=take_over_lock)
        with lock as note:
            notes += [note] if note else []
            run = merge()
    return MergeReport(
        run=run,
        created=target is None,
        sources=[MergedSource(s.path, len(s.ids), _shard_label(s.run)) for s in found],
        items=len(owner),
        shards=sorted(holder),
        shard_count=count,
        warnings=notes
        + [
            f"{s.path}: run {name!r} is {s.run.status}, not finished (still running, or"
            f" stopped): merged the {len(s.ids)} results it had; its other items stay missing"
            for s in found
            if s.run.status != "finished"
        ],
    )


# --- finalize --------------------------------------------------------------------------------


def scoring_of(run: RunRecord) -> ScoringConfig:
    """The scoring configuration a run recorded (``describe``'s ``scoring``)."""
    recorded = run.config.get("scoring")
    if not isinstance(recorded, dict):
        raise UsageError(f"run {run.name!r} records no scoring configuration; cannot finalize")
    return ScoringConfig(**recorded)


def _run_items(store: LocalStore, run: RunRecord) -> tuple[list[DatasetItem], Any]:
    """The run's dataset items at its recorded version (LangFuse's for a LangFuse-mode run),
    cut to its ``limit``; and the LangFuse client when one was opened (caller closes it)."""
    lf: Any = None
    if run.backend == "langfuse":
        from extraction_eval.backends.langfuse import connect
        from extraction_eval.experiments.langfuse_mode import load_bounded

        lf = connect()
        items = load_bounded(lf, run.dataset, run.dataset_version).items
    else:
        items = store.get_items(run.dataset, version=run.dataset_version)
    limit = run.config.get("limit")
    if isinstance(limit, int):
        items = items[:limit]
    return list(items), lf


def finalize_run(
    store: LocalStore,
    name: str,
    *,
    dataset: str | None = None,
    allow_missing: bool = False,
    verify: bool = True,
    take_over_lock: bool = False,
) -> RunOutcome:
    """Compute run ``name``'s run-level scores from every stored result (after ``merge_runs``)
    and record them; for a LangFuse-mode run also post them on its experiment, once
    (deterministic score ids), and read them back unless ``verify=False``.

    Refused before anything is written: items of the run's dataset version without a result
    (``MissingItems``, naming how many; ``allow_missing=True`` finalizes without them and says
    so in the outcome's warnings), and a dataset whose items are not those the shards ran
    (its fingerprint differs), and a run that another process is running right now
    (``InvalidValue`` on ``take_over_lock``: finalizing would mark it finished under it).
    """
    from extraction_eval.analysis.stored import get_run

    run = get_run(store, name, dataset)
    with store.holding_run_lock(run.id, name, doing="finalize", take_over=take_over_lock) as note:
        items, lf = _run_items(store, run)
        try:
            with _reading(store.path, "nothing finalized"):
                outcome = _finalize(
                    store, run, items, lf, allow_missing=allow_missing, verify=verify
                )
        finally:
            if lf is not None:
                from extraction_eval.backends.langfuse import close_client

                close_client(lf)
    if note:
        outcome.warnings.insert(0, note)
    return outcome


def _finalize(
    store: LocalStore,
    run: RunRecord,
    items: list[DatasetItem],
    lf: Any,
    *,
    allow_missing: bool,
    verify: bool,
) -> RunOutcome:
    where = f"dataset {run.dataset!r} version {run.dataset_version}"
    if not items:
        raise UsageError(f"{where} has no items; cannot finalize run {run.name!r}")
    expected = run.config.get("dataset_fingerprint")
    if expected is not None and dataset_fingerprint(items) != expected:
        raise UsageError(
            f"the items of {where} here are not the ones run {run.name!r} was sharded from"
            " (their fingerprint differs): finalize in a store that holds that version"
        )
    if lf is not None and not run.experiment_id:
        raise UsageError(
            f"run {run.name!r} has no LangFuse experiment id (no item finished in any shard?):"
            " there is no experiment to put its run-level scores on"
        )
    have = set(store.result_ids(run.id))
    missing = [item.id for item in items if item.id not in have]
    warnings: list[str] = []
    if missing:
        message = (
            f"run {run.name!r} has results for {len(items) - len(missing)} of the {len(items)}"
            f" items of {where}: {len(missing)} missing (first: {', '.join(missing[:3])})"
        )
        if not allow_missing:
            raise MissingItems(message + "; merge the other shards' stores first", missing)
        warnings.append(message + "; run-level scores cover the items that have a result")
    extra = len(have - {item.id for item in items})
    if extra:
        warnings.append(f"{extra} results of run {run.name!r} are for items not in {where}")

    # every item's text, as a one-process run scores context_bleed against
    scorer = Rescorer(
        scoring_of(run),
        ContextIndex({i.id: i.text for i in items}),
        view=GoldView.of_run(run.config),  # the run's schema, labels and gold floor
    )
    summary = finalize(store, run, items, scorer, status="finished")
    if lf is not None:
        _post_to_experiment(lf, run, summary.run_scores, verify=verify)
    final = store.get_run_by_id(run.id)
    return RunOutcome(
        run=final,
        summary=summary,
        ran=0,
        read_results=stored_results(store, run.id, [i.id for i in items]),
        warnings=warnings,
        experiment_url=final.config.get("langfuse_experiment_url"),
    )


def _post_to_experiment(lf: Any, run: RunRecord, scores: Sequence[Any], *, verify: bool) -> None:
    from extraction_eval.backends.langfuse import missing_summary, verify_run, verify_timeout_s
    from extraction_eval.errors import BackendError
    from extraction_eval.experiments.langfuse_mode import post_run_scores

    assert run.experiment_id, "checked before finalizing"
    post_run_scores(lf, run.experiment_id, scores)
    lf.flush()
    if not verify:
        return
    report = verify_run(
        lf,
        traces={},
        experiment_id=run.experiment_id,
        run_score_names=[s.name for s in scores],
        since=None,
        timeout_s=verify_timeout_s(),
    )
    if not report.ok:
        raise BackendError(
            f"LangFuse is missing run scores of run {run.name!r} (experiment"
            f" {run.experiment_id}): {missing_summary(report, run_scores=len(scores))}"
        )
