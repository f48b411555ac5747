"""``runs rescore``: a stored run's outputs scored against another version of its dataset, kept
as a run of its own (``NAME@vN``), so ``compare`` can tell a change of gold from a change of
model: old run vs rescored = what the new gold changed; rescored vs the next run = the model.

No model is called: every stored output (and every failed item, a failure still) is scored
against the item as it is in version N. Items version N lacks are left out, and said.
"""

from __future__ import annotations

from collections.abc import Iterator

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.evaluators import ContextIndex, GoldView, item_scores
from extraction_eval.evaluators.counts import counts_key, encode_counts
from extraction_eval.experiments.runner import (
    Rescorer,
    RunOutcome,
    category_scores,
    finalize,
    stored_results,
    taxonomy_tags,
)
from extraction_eval.experiments.shards import scoring_of
from extraction_eval.types import DatasetItem, ItemResult, Score


def _items(store: LocalStore, run: RunRecord, version: int | str) -> list[DatasetItem]:
    if run.backend == "langfuse":
        from extraction_eval.backends.langfuse import LangfuseDatasetBackend

        backend = LangfuseDatasetBackend.from_env()
        try:
            return list(backend.get_items(run.dataset, version=version))
        finally:
            backend.close()
    return store.get_items(run.dataset, version=version)


def rescore_run(
    store: LocalStore,
    name: str,
    version: int | str,
    *,
    new_name: str | None = None,
    dataset: str | None = None,
) -> RunOutcome:
    """Run ``name``'s outputs scored on dataset version ``version``, stored as ``new_name``
    (default ``NAME@vVERSION``)."""
    from extraction_eval.analysis.stored import get_run

    run = get_run(store, name, dataset)
    if isinstance(version, str) and version.isdigit():
        version = int(version)
    target_name = new_name or f"{name}@v{version}"
    if store.get_run(target_name, run.dataset) is not None:
        raise InvalidValue(
            "new_name",
            f"run {target_name!r} already exists on dataset {run.dataset!r}: it holds this"
            " rescore already; give another name",
        )
    items = _items(store, run, version)
    if not items:
        raise UsageError(f"dataset {run.dataset!r} version {version} has no items")
    by_id = {i.id: i for i in items}
    have = store.result_ids(run.id)
    kept = [by_id[i] for i in have if i in by_id]
    warnings: list[str] = []
    if len(kept) < len(have):
        warnings.append(
            f"{len(have) - len(kept)} results of run {name!r} are for items not in version"
            f" {version}: left out"
        )
    if len(kept) < len(items):
        warnings.append(
            f"{len(items) - len(kept)} items of version {version} have no result in run {name!r}"
        )
    scoring = scoring_of(run)
    view = GoldView.of_run(run.config)
    scorer = Rescorer(scoring, ContextIndex({i.id: i.text for i in items}), view=view)
    key = counts_key(scoring, view.floor, view.schemas_key())
    config = {k: v for k, v in run.config.items() if k not in ("dataset_fingerprint", "limit")}
    config["rescored_from"] = {"run": run.name, "dataset_version": run.dataset_version}
    target = store.create_run(
        name=target_name,
        dataset=run.dataset,
        dataset_version=version,
        config=config,
        backend=run.backend,
    )

    def rescored() -> Iterator[ItemResult]:
        for result in store.iter_item_results(run.id, [i.id for i in kept]):
            scored = scorer.score(by_id[result.item_id], result.output)
            tags = taxonomy_tags(scored)
            failed = result.output is None
            yield result.model_copy(
                update={
                    "scores": [
                        *item_scores(scored),
                        Score(
                            name="extraction_error",
                            value=failed,
                            data_type="BOOLEAN",
                            comment=result.error if failed else None,
                        ),
                        *category_scores(tags),
                    ],
                    "taxonomy": tags,
                    "counts": encode_counts(
                        scored, key=key, schema_failure=result.error_kind == "schema"
                    ),
                }
            )

    for result in rescored():
        store.record_result(target.id, result)
    summary = finalize(store, target, kept, scorer, status="finished")
    return RunOutcome(
        run=store.get_run_by_id(target.id),
        summary=summary,
        ran=0,
        read_results=stored_results(store, target.id, [i.id for i in kept]),
        warnings=warnings,
    )
