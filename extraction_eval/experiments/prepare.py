"""Everything a run needs before its first model call, the same in both modes: the items,
the prompt, the pipeline, and the run record (new, or reopened by ``resume`` /
``retry_errors``). Whatever can refuse the setup does so before the record exists."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from extraction_eval.analysis.score_files import gold_ignored_warning
from extraction_eval.backends.base import ResultStore
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.backends.local.locks import LockHolder, take_run_lock
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.evaluators import ContextIndex, GoldView
from extraction_eval.evaluators.stats.scipy_preload import preload_intervals, preload_scoring
from extraction_eval.evaluators.vote import trusted_gold
from extraction_eval.experiments.budget import (
    Budget,
    CostEstimate,
    check_estimate,
    estimate_cost,
    spent_before,
)
from extraction_eval.experiments.config import RunConfig, check_fail_under_attributes, describe
from extraction_eval.experiments.partition import shard_record
from extraction_eval.experiments.runner import ItemRunner, asked_item
from extraction_eval.llm.base import Provider
from extraction_eval.llm.formats import FormatChoice
from extraction_eval.llm.openai_provider import AUTO
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.prompts.versions import select_run_prompt
from extraction_eval.types import DatasetItem, Schema

# Config keys that must not change when a run is resumed: results would mix two experiments.
# scoring settings a resume must keep: (recorded key, its flag, its default)
_ALIAS_SETTINGS: tuple[tuple[str, str, object], ...] = (
    ("aliases", "--no-aliases", True),
    ("alias_groups", "--aliases", []),
)
_RESUME_INVARIANTS = (
    "model",
    "temperature",
    "prompt_hash",
    "pipeline_ref",
    "price_override",
    "min_gold_confidence",
    "shard",
    "schema",
    "dataset_schema",
    "response_format",
    "strict_json",
)


class _ItemReads:
    """A run's items read afresh on each call (in local mode from the store, a page at a
    time), so a 100,000-item run never holds its dataset in memory; only the ids are kept."""

    item_ids: list[str]  # the run's items (a shard's: its own), in dataset order
    todo_ids: list[str]  # those this invocation runs (resume skips finished ones)
    read_items: Callable[[], Iterator[DatasetItem]]  # a new stream of the run's items

    def iter_items(self) -> Iterator[DatasetItem]:
        """The run's items, in dataset order, built as they are read."""
        return self.read_items()

    def iter_todo(self) -> Iterator[DatasetItem]:
        """The items this invocation runs, in dataset order."""
        if len(self.todo_ids) == len(self.item_ids):
            return self.read_items()
        wanted = set(self.todo_ids)
        return (item for item in self.read_items() if item.id in wanted)


@dataclass
class PreparedRun(_ItemReads):
    """Everything resolved before the first model call; shared by local and LangFuse mode.
    It keeps the run's item ids, not its items (``iter_items`` / ``iter_todo``).

    :func:`plan` makes one without touching the store (``--dry-run``'s estimate: ``run`` is
    not there yet); :func:`prepare` then opens the run record (new, or reopened by
    ``resume`` / ``retry_errors``) and says what this invocation runs (``todo_ids``)."""

    config: RunConfig
    item_ids: list[str]
    todo_ids: list[str]
    read_items: Callable[[], Iterator[DatasetItem]]
    runner: ItemRunner
    prompt: PromptTemplate
    record: dict[str, Any]  # what the run record says of the setup
    estimate: CostEstimate  # of the items in ``todo_ids`` (before any call)
    dataset_version: int | str | None
    warnings: list[str] = field(default_factory=list)
    existing: RunRecord | None = None  # the stored run a resume continues
    spent: float = 0.0  # what a resumed run spent already on the results it keeps
    opened: RunRecord | None = None  # the run record, once ``prepare`` opened it
    budget: Budget | None = None  # the --max-cost ceiling, with what the run spent before
    lock: LockHolder | None = None  # this process's lock on the run, until it closes

    @property
    def run(self) -> RunRecord:
        if self.opened is None:
            raise RuntimeError("a planned run has no run record yet: prepare() opens it")
        return self.opened

    @property
    def created(self) -> bool:
        """This invocation created the run (see ``discard_if_empty``)."""
        return self.opened is not None and self.existing is None


def default_run_name(config: RunConfig) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{config.pipeline.model.replace(':', '-')}-{stamp}"


def run_record(config: RunConfig, prompt: PromptTemplate, **extra: Any) -> dict[str, Any]:
    return describe(
        config,
        prompt={
            "name": prompt.name,
            "label": prompt.label,
            "version": prompt.version,
            "source": prompt.source,
        },
        prompt_hash=prompt.content_hash,
        pipeline_ref=config.pipeline.pipeline,
        **extra,
    )


def open_run(
    store: LocalStore,
    config: RunConfig,
    item_ids: Sequence[str],
    *,
    dataset_version: int | str | None,
    record: dict[str, Any],
    backend: str = "local",
) -> tuple[RunRecord, list[str], LockHolder, str | None]:
    """Create the run, or reopen it for ``--resume`` / ``--retry-errors``, locked for this
    process (a second process running it is refused); return the ids of the items to run:
    never finished ones, plus errored ones when asked to retry them; and the lock, with a note
    when a dead process's lock was taken over."""
    existing = check_reuse(store, config, record)
    assert config.name is not None
    name = config.name
    if existing is None:
        locked: list[tuple[LockHolder, str | None]] = []
        run = store.create_run(
            name=name,
            dataset=config.dataset,
            dataset_version=dataset_version,
            config=record,
            backend=backend,
            then=lambda conn, run_id: locked.append(take_run_lock(conn, run_id, name)),
        )
        return run, list(item_ids), *locked[0]
    lock, note = store.lock_run(existing.id, name, take_over=config.take_over_lock)
    try:
        ok = {r.item_id: r.ok for r in store.iter_results(existing.id)}  # streamed, kept small
    except BaseException:
        store.release_run_lock(lock)
        raise
    retry = config.retry_errors
    return existing, [i for i in item_ids if i not in ok or (retry and not ok[i])], lock, note


def check_reuse(
    store: LocalStore, config: RunConfig, record: dict[str, Any], *, skip: Sequence[str] = ()
) -> RunRecord | None:
    """The stored run this invocation continues (None: a new one); raise when the name is
    taken without ``--resume`` / ``--retry-errors`` or the resumed run's setup changed
    (``skip``: invariants not settled yet)."""
    assert config.name is not None
    existing = store.get_run(config.name, config.dataset)
    if existing is None:
        return None
    if not (config.resume or config.retry_errors):
        raise InvalidValue(  # the CLI shows the field as its flag: "--resume is needed ..."
            "resume",
            f"is needed to continue run {config.name!r} on dataset {config.dataset!r}, which"
            " exists already (or retry its errors, or choose another name)",
        )
    changed = [
        k
        for k in _RESUME_INVARIANTS
        if k not in skip and _recorded(existing.config, k, record) != record.get(k)
    ]
    # which names are one entity decides every count: a changed alias table is another run
    # (a run recorded before these settings existed had them at their defaults)
    was, now = existing.config.get("scoring") or {}, record.get("scoring") or {}
    changed += [
        flag
        for key, flag, default in _ALIAS_SETTINGS
        if was.get(key, default) != now.get(key, default)
    ]
    if changed:
        raise UsageError(
            f"cannot resume run {config.name!r}: {', '.join(changed)} differ from the original run"
        )
    return existing


def _recorded(config: dict[str, Any], key: str, record: dict[str, Any]) -> Any:
    """A stored run's invariant; a model run made before the response format was recorded
    sent json_schema."""
    value = config.get(key)
    if key == "response_format" and value is None and record.get(key) == "json_schema":
        return "json_schema"
    return value


def _shard_note(config: RunConfig, total: int, held: int) -> str:
    """What a shard run's summary is (and is not): the shard's items only."""
    return (
        f"shard {config.shard} holds {held} of the {total} items: this summary covers"
        " this shard only; fold the shard stores into one (runs merge) and compute the run's"
        f" scores from all items with `runs finalize {config.name}`"
    )


def discard_if_empty(store: ResultStore, prep: PreparedRun) -> bool:
    """A run this invocation created that ended before its first item leaves nothing behind:
    it is deleted, so the same ``--name`` works again without ``--resume``. Either way the
    run's lock is given back."""
    deleted = prep.created and store.delete_empty_run(prep.run.id)
    release_lock(store, prep)
    return deleted


def release_lock(store: ResultStore, prep: PreparedRun) -> None:
    """Give the run's lock back (once; a deleted run took its lock with it)."""
    lock, prep.lock = prep.lock, None
    if lock is not None:
        store.release_run_lock(lock)


def plan(
    config: RunConfig,
    store: LocalStore,
    *,
    items: Sequence[DatasetItem] | None = None,
    dataset_version: int | str | None = None,
    prompt: PromptTemplate | None = None,
    tracer: Any = None,
    extra_record: dict[str, Any] | None = None,
    provider: Provider | None = None,
    dataset_schema: Schema | None = None,
    detect: bool = True,
    scores_here: bool = True,
) -> PreparedRun:
    """Everything up to the run record: items, prompt, pipeline, what is still to run and its
    cost estimate. Refuses a bad setup; creates and changes nothing.

    ``detect``: settle the response format of an OpenAI-compatible server now (``auto`` probes
    it, ``llm/formats.py``); False (``--dry-run``) makes no call and records it as not probed.
    ``scores_here``: this process scores the items, so it imports scipy's solver and sparse
    matrices while the probe waits (False: worker processes score, and import them if an item
    needs them; only what the run's intervals need is imported here).

    The items are never all held: what needs every item (the context index, the shard's
    fingerprint, the estimate, the gold-confidence count) reads them as a stream."""
    if items is None:
        info = store.get_dataset(config.dataset)
        dataset_version = config.dataset_version or info.version
        dataset_schema = info.schema
    read_all, read_texts = _item_sources(config, store, items, dataset_version)
    try:
        texts = dict(read_texts())  # id -> text, dataset order: the context index's input
    except InvalidValue as exc:  # the store's ``version`` is this config's dataset_version
        if exc.field != "version":
            raise
        raise InvalidValue("dataset_version", exc.problem) from None
    item_ids = list(texts)
    if not item_ids:
        raise UsageError(f"dataset {config.dataset!r} has no items to run")
    # attributes the run's or the dataset's schema declares count as the item's own
    view = GoldView(config.min_gold_confidence, config.schema, dataset_schema)
    check_fail_under_attributes(
        config.fail_under, (view.item(i) for i in read_all()), config.dataset
    )
    if config.name is None:
        config = replace(config, name=default_run_name(config))
    warnings: list[str] = []
    # context_bleed looks at every item's text: a shard scores against all of them, exactly
    # as one process running every item would
    context = ContextIndex(texts)
    del texts  # the index keeps its own copy
    extra = dict(extra_record or {})
    if dataset_schema is not None:  # items without their own schema run with it
        extra["dataset_schema"] = dataset_schema.model_dump(mode="json")
    read_items = read_all
    if config.shard is not None:
        shard = config.shard
        extra.update(shard_record(shard, read_all()))
        total = len(item_ids)
        item_ids = [i for i in item_ids if shard.holds(i)]
        warnings.append(_shard_note(config, total, len(item_ids)))

        def read_items() -> Iterator[DatasetItem]:
            return (item for item in read_all() if shard.holds(item.id))

    # local mode: the local store's version asked for by --prompt-label/--prompt-version (an
    # unknown one is an error before the run exists), else the bundled template
    prompt = prompt or select_run_prompt(store, config.pipeline)
    record = run_record(config, prompt, **extra)
    # Everything that can refuse the setup (name taken, unknown provider, missing key, bad
    # --pipeline, --max-cost below the estimate) runs before the run record exists: a refused
    # setup leaves nothing behind.
    existing = check_reuse(store, config, record, skip=("response_format",))
    pipeline = make_pipeline(  # the cache's writes go with each item's result (driver)
        config.pipeline,
        cache=store.cache(defer_writes=True),
        prompt=prompt,
        tracer=tracer,
        provider=provider,
    )
    pricer = Pricer.for_config(config.pipeline)
    runner = ItemRunner(
        pipeline=pipeline,
        scoring=config.scoring,
        context_texts=context,
        pricer=pricer,
        min_gold_confidence=config.min_gold_confidence,
        schema=config.schema,
        dataset_schema=dataset_schema,
    )
    spent = 0.0
    if existing is None:
        todo_ids = list(item_ids)
    else:
        done = {r.item_id: (r.ok, r.usage.cost_usd) for r in store.iter_results(existing.id)}
        retry = config.retry_errors
        todo_ids = [i for i in item_ids if i not in done or (retry and not done[i][0])]
        spent = spent_before({i: cost for i, (_, cost) in done.items()}, todo_ids)
        del done
    wanted = None if len(todo_ids) == len(item_ids) else set(todo_ids)
    key_for = getattr(pipeline, "key_for", None)  # a model pipeline with a response cache
    cache = getattr(pipeline, "cache", None)  # as the run's cache mode has it (None: off)

    def cached(item: DatasetItem) -> bool:
        if key_for is None or cache is None:
            return False
        contains = getattr(cache, "contains", None)  # the store's: remembers a miss for the
        if contains is not None:  # item's own lookup, so the item does not read again
            return bool(contains(key_for(item)))
        return cache.get(key_for(item)) is not None

    def cached_in_any_format(item: DatasetItem) -> bool:  # ``get``: remembers nothing
        keys_for = getattr(pipeline, "keys_any_format", None)
        return (
            keys_for is not None
            and cache is not None
            and any(cache.get(key) is not None for key in keys_for(item))
        )

    # a Batch API run has no synchronous endpoint to probe: json_schema, as OpenAI's batch takes
    probing = detect and not config.batch
    if config.max_cost is not None and probing and _will_probe(pipeline):
        # the probe is paid for, so a run the ceiling refuses is refused before it: on the
        # least the run can cost (an item cached under any response format costs nothing)
        least = estimate_cost(
            (
                asked_item(runner.view.item(item))
                for item in read_items()
                if wanted is None or item.id in wanted
            ),
            prompt=prompt,
            pricer=pricer,
            cached=cached_in_any_format,
        )
        check_estimate(config.max_cost, least, spent)
    # the probe asks as the items will be asked: the run's or dataset's schema, labels mapped
    asked = lambda: (asked_item(runner.view.item(i)) for i in read_items())  # noqa: E731
    choice = _response_format(pipeline, asked, detect=probing, preload=scores_here)
    if choice is not None:
        record["response_format"] = choice.used
        record["response_format_choice"] = choice.to_json()
        if (warning := choice.warning()) is not None:
            warnings.append(warning)
        if existing is not None and detect:
            check_reuse(store, config, record)  # the resumed run was asked the same way

    # what the provider says of the run's settings (Anthropic: a temperature it cannot send)
    warnings.extend(getattr(getattr(pipeline, "provider", None), "warnings", None) or ())

    # one pass over the items: the gold-confidence count over all, the estimate over the todo
    confidence = config.min_gold_confidence
    ignored = 0

    def todo_counting_gold() -> Iterator[DatasetItem]:
        nonlocal ignored
        for item in read_items():
            if confidence is not None:
                ignored += trusted_gold(item.expected, item.metadata, confidence)[1]
            if wanted is None or item.id in wanted:
                # as the pipeline will see it (the run's or dataset's schema, labels mapped):
                # the prompt estimated and the cache key looked up are the ones sent
                yield asked_item(runner.view.item(item))

    todo_stream = todo_counting_gold()  # lazy: an offline estimate reads no item
    estimate = estimate_cost(
        todo_stream,
        prompt=prompt,
        pricer=pricer,
        cached=cached,
        skipped_done=len(item_ids) - len(todo_ids),
    )
    if confidence is not None:
        deque(todo_stream, maxlen=0)  # the estimate may stop early (offline): count the rest
        warnings.append(gold_ignored_warning(ignored, confidence))
    return PreparedRun(
        config=config,
        item_ids=item_ids,
        todo_ids=todo_ids,
        read_items=read_items,
        runner=runner,
        prompt=prompt,
        record=record,
        estimate=estimate,
        dataset_version=dataset_version,
        warnings=warnings,
        existing=existing,
        spent=spent,
    )


def _will_probe(pipeline: object) -> bool:
    """Whether settling the response format will call the server (``auto`` on a server
    that is not OpenAI's own API, not settled by an earlier run of the same provider)."""
    provider = getattr(pipeline, "provider", None)
    return (
        getattr(pipeline, "resolve_format", None) is not None
        and getattr(provider, "response_format", None) == AUTO
        and getattr(provider, "format_choice", None) is None
        and not getattr(provider, "official_api", True)
    )


def _response_format(
    pipeline: object,
    read_items: Callable[[], Iterator[DatasetItem]],
    *,
    detect: bool,
    preload: bool = True,
) -> FormatChoice | None:
    """How the run asks its server for JSON (None: not a model pipeline with the choice).
    The first item's prompt and schema make the probe; while it waits, scipy is imported:
    what scoring needs (``preload``), else only what the run's intervals need (a run whose
    workers score needs no solver here)."""
    resolve = getattr(pipeline, "resolve_format", None)
    provider = getattr(pipeline, "provider", None)
    if resolve is None or getattr(provider, "response_format", None) is None:
        return None
    if not detect and provider.response_format == AUTO and not provider.official_api:  # type: ignore[union-attr]
        return FormatChoice(AUTO, "json_schema", "not probed", provider.server_family)  # type: ignore[union-attr]
    first = next(iter(read_items()), None)
    if first is None:
        return None
    # while the probe waits for the server, this thread imports what scoring defers (scipy):
    # otherwise the first item needing the solver imports it in the loop, every call waiting
    meanwhile = preload_scoring if preload else preload_intervals
    choice: FormatChoice | None = resolve(first, meanwhile=meanwhile)
    return choice


def prepare(
    config: RunConfig,
    store: LocalStore,
    *,
    items: Sequence[DatasetItem] | None = None,
    dataset_version: int | str | None = None,
    prompt: PromptTemplate | None = None,
    tracer: Any = None,
    backend: str = "local",
    extra_record: dict[str, Any] | None = None,
    provider: Provider | None = None,
    dataset_schema: Schema | None = None,
    scores_here: bool = True,
) -> PreparedRun:
    """:func:`plan`, then the run record opened: the run as this invocation will run it
    (``scores_here``: see :func:`plan`)."""
    p = plan(
        config,
        store,
        items=items,
        dataset_version=dataset_version,
        prompt=prompt,
        tracer=tracer,
        extra_record=extra_record,
        provider=provider,
        dataset_schema=dataset_schema,
        scores_here=scores_here,
    )
    config, record = p.config, p.record
    check_estimate(config.max_cost, p.estimate, p.spent)
    run, todo, lock, taken_over = open_run(
        store, config, p.item_ids, dataset_version=p.dataset_version, record=record,
        backend=backend,
    )  # fmt: skip
    started_with = (run.config.get("pricing") or {}).get("version")
    now_with = record["pricing"].get("version")
    warnings = list(p.warnings)
    if taken_over:
        warnings.append(taken_over)
    if todo and started_with != now_with:  # a resumed run, priced by another database version
        warnings.append(
            f"items run now are priced with genai-prices {now_with}; run {config.name!r}"
            f" started with {started_with} (its record keeps that)"
        )
    budget = None if config.max_cost is None else Budget(config.max_cost, p.spent)
    return replace(p, todo_ids=todo, warnings=warnings, opened=run, budget=budget, lock=lock)


def _item_sources(
    config: RunConfig,
    store: LocalStore,
    items: Sequence[DatasetItem] | None,
    dataset_version: int | str | None,
) -> tuple[Callable[[], Iterator[DatasetItem]], Callable[[], Iterable[tuple[str, str]]]]:
    """Readers of the run's items and of their (id, text), both cut at ``--limit``: from the
    local store a page at a time, or from the items given (LangFuse mode: the SDK's). Local
    reads are pinned to the version the run started on: an upload during the run changes
    neither what runs nor what ``finalize`` scores against."""
    limit = config.limit
    if items is None:
        name, version = config.dataset, dataset_version or None  # 0: a dataset with no items

        def read_items() -> Iterator[DatasetItem]:
            return islice(store.iter_items(name, version=version), limit)

        def read_texts() -> Iterable[tuple[str, str]]:
            return islice(store.iter_item_texts(name, version=version), limit)

        return read_items, read_texts
    held = list(items)[:limit]
    return (lambda: iter(held)), (lambda: ((i.id, i.text) for i in held))
