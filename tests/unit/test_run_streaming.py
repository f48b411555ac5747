"""A run and an upload stream their items: the store hands a dataset out a page at a time, the
runner pulls the next item only when a worker is free, finalize reads the items once alongside
their stored results, and ``datasets upload`` converts a line only when the store takes it. So
a 100,000-item run never holds its dataset (each item ~5 KB as a model) in memory.

Asserted on what is alive or pulled at a time, never on timings or RSS (``benchmarks/``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.backends.base import canonical_json, item_content_hash
from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local import datasets as store_datasets
from extraction_eval.cli import main
from extraction_eval.datasets import jsonl
from extraction_eval.errors import NotFoundError, UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.budget import estimate_cost
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import parse_shard
from extraction_eval.experiments.prepare import plan, prepare
from extraction_eval.experiments.run import arun_local
from extraction_eval.experiments.runner import ItemRunner, finalize, run_bounded
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult

GOLD = Extraction(entities=[Entity(name="Ada Lovelace", type="person")])


def _item(i: int, text: str | None = None) -> DatasetItem:
    return DatasetItem(id=f"i{i:04d}", text=text or f"Ada Lovelace wrote note {i}.", expected=GOLD)


class EchoGold:
    """A pipeline that answers each item's gold (so every item scores 1.0)."""

    async def extract(self, item: DatasetItem) -> PipelineOutput:
        await asyncio.sleep(0)
        return PipelineOutput(extraction=item.expected, raw="{}", attempts=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path / "s.db", seed=False)
    yield s
    s.close()


# --- the store ------------------------------------------------------------------------------


def test_iter_items_pages_through_a_version_in_dataset_order(store: LocalStore) -> None:
    store.upload_items("d", [_item(i) for i in range(7)])  # version 1
    store.upload_items("d", [_item(3, "changed"), _item(7), _item(8)])  # version 2
    archived = _item(5).model_copy(update={"status": "ARCHIVED"})
    store.upload_items("d", [archived])  # version 3
    for version in (1, 2, 3, None):
        expected = store.get_items("d", version=version)
        for batch_size in (1, 2, 3, 500):
            got = list(store.iter_items("d", version=version, batch_size=batch_size))
            assert got == expected
            texts = list(store.iter_item_texts("d", version=version, batch_size=batch_size))
            assert texts == [(i.id, i.text) for i in expected]
    assert [i.id for i in store.iter_items("d", version=1)] == [f"i{i:04d}" for i in range(7)]
    assert "i0005" not in [i.id for i in store.iter_items("d")]
    assert [i.text for i in store.iter_items("d", version=2) if i.id == "i0003"] == ["changed"]
    with pytest.raises(NotFoundError, match="no version 4"):
        store.iter_items("d", version=4)  # checked when called, not when first read
    with pytest.raises(UsageError, match="batch_size"):
        next(store.iter_items("d", batch_size=0))


def test_upload_reads_its_items_once_one_at_a_time(store: LocalStore) -> None:
    pulled: list[str] = []

    def items() -> Iterator[DatasetItem]:
        for i in range(5):
            pulled.append(f"i{i:04d}")
            yield _item(i)

    report = store.upload_items("d", items())  # a one-shot generator, not a list
    assert (report.created, report.version) == (5, 1)
    assert [i.id for i in store.get_items("d")] == pulled
    # a repeated id found mid-stream rolls the whole upload back
    with pytest.raises(UsageError, match="'i0001' appears twice"):
        store.upload_items("d", iter([_item(9), _item(1, "x"), _item(1, "y")]))
    assert [i.id for i in store.get_items("d")] == pulled and store.get_dataset("d").version == 1


# --- the runner and finalize --------------------------------------------------------------


def test_run_bounded_pulls_an_item_only_when_a_worker_is_free() -> None:
    pulled, finished, ahead = 0, 0, []

    def items() -> Iterator[DatasetItem]:
        nonlocal pulled
        for i in range(200):
            pulled += 1
            ahead.append(pulled - finished)
            yield _item(i)

    def done(result: ItemResult) -> None:
        nonlocal finished
        finished += 1

    runner = ItemRunner(pipeline=EchoGold(), scoring=ScoringConfig(resamples=50))
    asyncio.run(run_bounded(items(), runner.run_item, concurrency=4, on_result=done))
    assert (pulled, finished) == (200, 200)
    assert max(ahead) <= 4  # never more items out of the iterator than workers


def test_finalize_reads_a_one_shot_stream_of_items_with_their_results(store: LocalStore) -> None:
    items = [_item(i) for i in range(1200)]
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    runner = ItemRunner(pipeline=EchoGold(), scoring=ScoringConfig(resamples=50))

    async def run_all() -> None:
        for item in items[:-2]:  # the last two never ran: missing, not dropped silently
            store.record_result(run.id, await runner.run_item(item))

    asyncio.run(run_all())
    live: set[str] = set()
    most_alive = 0

    def stream() -> Iterator[DatasetItem]:  # fresh copies, so "alive" means held by finalize
        nonlocal most_alive
        for item in items:
            copy = item.model_copy()
            live.add(copy.id)
            weakref.finalize(copy, live.discard, copy.id)
            most_alive = max(most_alive, len(live))
            yield copy

    summary = finalize(store, run, stream(), runner)  # reads 500 items at a time
    assert (summary.items, summary.expected_items, summary.missing) == (1198, 1200, 2)
    assert summary.values["entity_f1"] == 1.0
    assert most_alive <= 501  # one batch (+ the one being pulled), never the whole dataset


class _Alive:
    """How many tracked objects were alive at most at once."""

    def __init__(self) -> None:
        self.live: set[int] = set()
        self.most = 0

    def track(self, obj: Any) -> None:
        key = id(obj)
        self.live.add(key)
        weakref.finalize(obj, self.live.discard, key)
        self.most = max(self.most, len(self.live))


def _track_built_items(monkeypatch: pytest.MonkeyPatch) -> _Alive:
    """Every item the store builds, tracked while it is alive."""
    alive, built = _Alive(), store_datasets.item_from_payload

    def tracked(**kw: Any) -> DatasetItem:
        item = built(**kw)
        alive.track(item)
        return item

    monkeypatch.setattr(store_datasets, "item_from_payload", tracked)
    return alive


def test_a_local_run_never_holds_its_dataset(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 1500
    store.upload_items("big", [_item(i) for i in range(n)])
    alive = _track_built_items(monkeypatch)
    config = RunConfig(dataset="big", name="r", concurrency=8)  # the offline baseline
    outcome = asyncio.run(arun_local(config, store=store))
    assert (outcome.summary.items, outcome.ran) == (n, n)
    assert [r.item_id for r in outcome.iter_results()] == [f"i{i:04d}" for i in range(n)]
    assert 0 < alive.most <= n // 2  # a page or two at a time, not all 1,500

    # resumed: every item finished already, so nothing runs and the summary is the same
    again = asyncio.run(arun_local(RunConfig(dataset="big", name="r", resume=True), store=store))
    assert (again.ran, again.summary.items) == (0, n)


def test_a_run_reads_the_dataset_version_it_started_on(store: LocalStore) -> None:
    store.upload_items("d", [_item(i) for i in range(3)])
    prep = prepare(RunConfig(dataset="d", name="r"), store)
    store.upload_items("d", [_item(1, "changed meanwhile"), _item(9)])  # version 2, mid-run
    assert list(prep.iter_items()) == store.get_items("d", version=1)
    assert [i.id for i in prep.iter_todo()] == prep.item_ids == ["i0000", "i0001", "i0002"]


def test_datasets_upload_converts_a_line_only_when_the_store_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.jsonl"
    lines = [{"id": f"big-{i}", "text": f"Ann Lee {i} works for Acme."} for i in range(40)]
    lines.insert(7, {"id": "big-3", "text": "a duplicate"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    converted = 0
    convert = jsonl._dataset_item

    def counting(line: Any) -> DatasetItem:
        nonlocal converted
        converted += line.id.startswith("big-")  # not the bundled datasets the store seeds
        return convert(line)

    ahead: list[int] = []
    upload = LocalStore.upload_items

    def watching(self: LocalStore, name: str, items: Any, **kw: Any) -> Any:
        if name != "big":  # the seed
            return upload(self, name, items, **kw)

        def watched() -> Iterator[DatasetItem]:
            for taken, item in enumerate(items, start=1):
                ahead.append(converted - taken)
                yield item

        return upload(self, name, watched(), **kw)

    monkeypatch.setattr(jsonl, "_dataset_item", counting)
    monkeypatch.setattr(LocalStore, "upload_items", watching)
    monkeypatch.setattr(sys, "argv", ["extraction-eval", "datasets", "upload", "big", str(path)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0, err
    assert "40 created" in out and "d.jsonl:8 (id big-3): duplicate id" in err
    assert len(ahead) == 40 and max(ahead) <= 1  # one line read ahead of the store at most
    assert [i.id for i in LocalStore().get_items("big")] == [f"big-{i}" for i in range(40)]


def test_plan_streams_the_items_for_the_shard_the_estimate_and_the_gold_count(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What needs every item (the shard's fingerprint and size, the cost estimate, the count of
    gold objects below ``min_gold_confidence``) reads them as a stream: the figures are those of
    the whole item list, but the list is never alive."""
    n = 1200
    low = {"gold": {"entities": [{"confidence": 0.2}], "relationships": []}}
    items = [_item(i).model_copy(update={"metadata": low if i % 3 == 0 else {}}) for i in range(n)]
    store.upload_items("big", items)
    shard = parse_shard("1/2")
    mine = [i for i in items if shard.holds(i.id)]
    alive = _track_built_items(monkeypatch)
    pipeline = PipelineConfig(model="fake:x", price_in=1.0, price_out=1.0)
    config = RunConfig(
        dataset="big", name="r", shard=shard, min_gold_confidence=0.5, pipeline=pipeline
    )
    p = plan(config, store)
    assert 0 < alive.most <= 20  # built one at a time as they are read, never all 1,200
    assert p.item_ids == [i.id for i in mine] and p.todo_ids == p.item_ids
    # the same figures as from the whole list held at once
    rows = [[i.id, item_content_hash(i)] for i in store.get_items("big")]
    fingerprint = hashlib.sha256(canonical_json(rows).encode("utf-8")).hexdigest()
    assert (p.record["dataset_items"], p.record["dataset_fingerprint"]) == (n, fingerprint)
    expected = estimate_cost(mine, prompt=p.prompt, pricer=Pricer.for_config(pipeline))
    assert p.estimate == expected and p.estimate.items == len(mine) > 0
    ignored = sum(1 for i in mine if i.metadata)
    assert f"{ignored} gold objects below ensemble confidence 0.5 ignored" in " ".join(p.warnings)
    assert f"holds {len(mine)} of the {n} items" in " ".join(p.warnings)
