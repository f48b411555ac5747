"""Diffing two stored runs: paired by item id whatever the order recorded, items in one run
only reported, the top changed items exact although the buffer is bounded, the gold of run A's
dataset version, the scoring config read back from the run record, one item's comparison."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_eval.analysis.compare import run_diff
from extraction_eval.analysis.compare.run_diff import compare_item, diff_runs
from extraction_eval.analysis.stored import run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import NotFoundError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.diff import diff_item
from extraction_eval.evaluators.diff_counts import DiffCounts
from extraction_eval.experiments.config import RunConfig, describe
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path / "s.db", seed=False)
    yield s
    s.close()


def _names(k: int) -> list[str]:
    return [f"Person{k}x{j}" for j in range(k % 5 + 1)]


def _item(k: int) -> DatasetItem:
    names = _names(k)
    return DatasetItem(
        id=f"i{k:03d}",
        text=" and ".join(names) + ".",
        expected=Extraction(entities=[Entity(name=n, type="person") for n in names]),
    )


def _result(item_id: str, names: list[str], *, error: bool = False) -> ItemResult:
    if error:
        return ItemResult(item_id=item_id, error="HTTP 500", error_kind="provider")
    return ItemResult(
        item_id=item_id, output=Extraction(entities=[Entity(name=n, type="person") for n in names])
    )


def _run(store: LocalStore, name: str, results: list[ItemResult], **cfg: object) -> RunRecord:
    config = {"scoring": cfg} if cfg else {}
    run = store.create_run(name=name, dataset="d", dataset_version=1, config=config)
    for r in results:
        store.record_result(run.id, r)
    return run


def test_runs_pair_by_id_and_items_in_one_run_are_reported(store: LocalStore) -> None:
    store.upload_items("d", [_item(k) for k in range(6)])
    in_a = [(4, _names(4)), (0, _names(0)), (1, _names(1)), (2, _names(2)), (5, _names(5))]
    a = _run(store, "a", [_result(f"i{k:03d}", names) for k, names in in_a])
    b_results = [
        _result("i001", _names(1)[:1]),  # 1 broken
        _result("i000", []),  # 1 broken
        _result("i002", _names(2), error=True),  # errored: its 3 broken
        _result("i003", _names(3)),  # only in B
        _result("i004", _names(4)),  # unchanged
    ]
    b = _run(store, "b", b_results)
    d = diff_runs(store, a, b)
    assert d.only_in_a == ["i005"] and d.only_in_b == ["i003"] and d.no_gold == []
    assert [(x.item_id, x.broken) for x in d.items] == [("i002", 3), ("i000", 1), ("i001", 1)]
    assert d.counts.items == 4 and d.counts.b_failed == 1
    assert d.counts.by_type("entity")["person"]["broken"] == 5
    assert d.to_json()["only_in_a"] == ["i005"]


def test_the_top_items_are_exact_when_the_buffer_is_pruned(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_diff, "PRUNE_SLACK", 2)
    items = [_item(k) for k in range(40)]
    store.upload_items("d", items)
    a = _run(store, "a", [_result(i.id, _names(k)) for k, i in enumerate(items)])
    # B keeps (k * 7) % 5 of each item's names: broken counts scattered over the ids
    b = _run(store, "b", [_result(i.id, _names(k)[: (k * 7) % 5]) for k, i in enumerate(items)])
    full = diff_runs(store, a, b, top=40)
    expected = sorted(full.items, key=lambda x: (-x.broken, x.item_id))[:3]
    got = diff_runs(store, a, b, top=3)
    assert [x.item_id for x in got.items] == [x.item_id for x in expected]
    assert got.counts.to_json() == full.counts.to_json()  # counts do not depend on top
    assert diff_runs(store, a, b, top=0).items == []


def test_gold_is_run_a_dataset_version(store: LocalStore) -> None:
    store.upload_items("d", [_item(1)])
    a = _run(store, "a", [_result("i001", _names(1))])
    b = _run(store, "b", [_result("i001", _names(1))])
    # version 2 changes the gold: run A (version 1) still diffs against version 1
    changed = _item(1).model_copy(update={"expected": Extraction()})
    store.upload_items("d", [changed])
    assert store.get_dataset("d").version == 2
    d = diff_runs(store, a, b)
    assert d.counts.items == 1 and not d.items and d.counts.gold_empty == 0


def test_a_dataset_missing_from_the_store_leaves_the_diff_empty_with_the_reason(
    store: LocalStore,
) -> None:
    a = _run(store, "a", [_result("i001", _names(1))])
    b = _run(store, "b", [_result("i001", [])])
    d = diff_runs(store, a, b)
    assert d.gold_missing is not None and "'d'" in d.gold_missing and d.counts.items == 0
    with pytest.raises(NotFoundError, match="no gold"):
        compare_item(store, a, b, "i001")


def test_scoring_config_is_read_back_from_the_run_record(store: LocalStore) -> None:
    scoring = ScoringConfig(match="exact", evidence="strict", symmetric=frozenset({"knows"}))
    record = describe(RunConfig(dataset="d", name="x", scoring=scoring))
    run = store.create_run(name="x", dataset="d", dataset_version=1, config=record)
    assert run_scoring(run) == scoring
    legacy = store.create_run(name="y", dataset="d", dataset_version=1, config={})
    assert run_scoring(legacy) == ScoringConfig()


def test_the_diff_uses_run_a_scoring_and_says_when_b_differs(store: LocalStore) -> None:
    store.upload_items("d", [_item(1)])
    spelt = [n.lower() for n in _names(1)]  # equal under casefold, not under exact
    a = _run(store, "a", [_result("i001", spelt)], match="casefold")
    b = _run(store, "b", [_result("i001", spelt)], match="exact")
    d = diff_runs(store, a, b)
    assert d.scoring_differs and d.config.match == "casefold" and not d.items
    d = diff_runs(store, b, a)
    assert d.config.match == "exact"


def test_compare_item_errors_name_the_run_that_lacks_it(store: LocalStore) -> None:
    store.upload_items("d", [_item(1), _item(2)])
    a = _run(store, "a", [_result("i001", _names(1)), _result("i002", _names(2))])
    b = _run(store, "b", [_result("i001", [])])
    cmp = compare_item(store, a, b, "i001")
    assert cmp.diff.broken == 2 and cmp.item.id == "i001" and cmp.pred_b == Extraction()
    with pytest.raises(NotFoundError, match=r"no result in run B \('b'\); it is only in run A"):
        compare_item(store, a, b, "i002")
    with pytest.raises(NotFoundError, match=r"no item 'zz' in run A \('a'\) or run B \('b'\)"):
        compare_item(store, a, b, "zz")


def test_items_with_equal_outputs_count_as_a_full_diff_would(store: LocalStore) -> None:
    """Equal outputs (and two errors) are counted without diffing: same counts as diffing."""
    empty = DatasetItem(id="i900", text="Nothing here.", expected=Extraction())
    items = [*(_item(k) for k in range(6)), empty]
    store.upload_items("d", items)
    a_res = [_result(i.id, _names(k)) for k, i in enumerate(items[:6])]
    b_res = [_result(i.id, _names(k)[: k % 2 + 1]) for k, i in enumerate(items[:6])]
    a_res[3] = b_res[3] = _result("i003", [], error=True)  # both errored
    a_res.append(_result("i900", ["Nobody"]))  # the same hallucination in both
    b_res.append(_result("i900", ["Nobody"]))
    a, b = _run(store, "a", a_res), _run(store, "b", b_res)
    got = diff_runs(store, a, b, top=10)
    by_id = {i.id: i for i in items}
    full = DiffCounts()
    for x, y in zip(a_res, b_res, strict=True):
        d = diff_item(
            item_id=x.item_id,
            text=by_id[x.item_id].text,
            gold=by_id[x.item_id].expected,
            pred_a=x.output if x.ok else None,
            pred_b=y.output if y.ok else None,
            config=ScoringConfig(),
        )
        full.add(d)
    assert got.counts.to_json() == full.to_json()
    assert got.counts.a_failed == got.counts.b_failed == 1 and got.counts.gold_empty == 1
    assert {d.item_id for d in got.items} == {"i002", "i004"}  # the others are equal
