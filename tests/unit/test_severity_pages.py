"""The stored per-item severity (m010_result_severity) and the pages read by it: SQL orders
and cuts in the order ``evaluators.severity`` defines, for new rows and for rows stored before
the columns existed (filled by the migration)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from extraction_eval.analysis.worst import is_failing, severity
from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.migrations import migrate
from extraction_eval.evaluators.severity import item_severity
from extraction_eval.types import ItemResult, Score, TaxonomyTag

# (item id, entity F1, relationship F1, wrong objects, errored)
CASES = [
    ("c-clean", 1.0, 1.0, 0, False),
    ("a-err", None, None, 2, True),
    ("b-half", 1.0, 0.0, 3, False),
    ("d-half-fewer", 0.5, 0.5, 1, False),
    ("e-zero", 0.0, 0.0, 4, False),
    ("f-ent-only", 0.25, None, 1, False),
    ("g-perfect-but-tagged", 1.0, 1.0, 1, False),
    ("h-no-scores", None, None, 0, False),
    ("i-zero-more", 0.0, 0.0, 6, False),
]


def _result(
    item_id: str, ent: float | None, rel: float | None, wrong: int, err: bool
) -> ItemResult:
    scores = [Score(name="entity_f1", value=ent)] if ent is not None else []
    scores += [Score(name="relationship_f1", value=rel)] if rel is not None else []
    scores.append(Score(name="schema_valid", value=True, data_type="BOOLEAN"))
    tags = [
        TaxonomyTag(category="missed", kind="entity", side="gold", index=i, label=f"x{i}")
        for i in range(wrong)
    ]
    return ItemResult(
        item_id=item_id,
        output=None,
        error="boom" if err else None,
        scores=scores,
        taxonomy=tags,
    )


EXPECTED = [r.item_id for r in sorted((_result(*c) for c in CASES), key=severity)]


def test_pages_follow_the_severity_order_and_cut_in_sql(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s.db", seed=False)
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    for case in CASES:
        store.record_result(run.id, _result(*case))
    assert EXPECTED[:3] == ["a-err", "i-zero-more", "e-zero"]
    assert EXPECTED[-1] == "c-clean"
    got = [r.item_id for r in store.page_results(run.id, limit=100)]
    assert got == EXPECTED
    pages = [store.page_results(run.id, limit=4, offset=o) for o in (0, 4, 8)]
    assert [r.item_id for p in pages for r in p] == EXPECTED
    failing = [r.item_id for r in store.page_results(run.id, limit=100, failing_only=True)]
    assert failing == [i for i in EXPECTED if i != "c-clean"]
    assert all(is_failing(r) for r in store.page_results(run.id, limit=100, failing_only=True))
    assert store.count_page_results(run.id, failing_only=True) == len(CASES) - 1
    assert [r.item_id for r in store.iter_results(run.id, order_by="severity")] == EXPECTED
    with sqlite3.connect(tmp_path / "s.db") as conn:
        stored = dict(
            conn.execute("SELECT item_id, severity FROM results WHERE run_id = ?", (run.id,))
        )
    assert stored["a-err"] == -1.0 and stored["b-half"] == 0.5 and stored["h-no-scores"] == 0.0
    store.close()


def test_migration_fills_the_severity_of_rows_stored_before_it(tmp_path: Path) -> None:
    """Rows written before m010 (no severity columns) get the severity a new row would get."""
    path = tmp_path / "old.db"
    fresh = LocalStore(tmp_path / "fresh.db", seed=False)  # the rows as today's code writes them
    run = fresh.create_run(name="r", dataset="d", dataset_version=1, config={})
    for case in CASES:
        fresh.record_result(run.id, _result(*case))
    fresh.close()
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, upto="m009_item_position_index")
    conn.execute("ATTACH DATABASE ? AS fresh", (str(tmp_path / "fresh.db"),))
    conn.execute("INSERT INTO runs SELECT * FROM fresh.runs")
    old_columns = [r[1] for r in conn.execute("PRAGMA table_info(results)")]
    cols = ", ".join(old_columns)
    conn.execute(f"INSERT INTO results ({cols}) SELECT {cols} FROM fresh.results")
    conn.execute("INSERT INTO scores SELECT * FROM fresh.scores")
    conn.execute("INSERT INTO result_taxonomy SELECT * FROM fresh.result_taxonomy")
    conn.execute("DETACH DATABASE fresh")
    conn.close()
    assert "severity" not in old_columns

    store = LocalStore(path, seed=False)  # applies m010
    got = [r.item_id for r in store.page_results(run.id, limit=100)]
    assert got == EXPECTED
    with sqlite3.connect(path) as check:
        stored = {
            r[0]: (r[1], r[2])
            for r in check.execute("SELECT item_id, severity, wrong_objects FROM results")
        }
    for case in CASES:
        assert stored[case[0]] == item_severity(_result(*case)), case
    plan = " ".join(
        str(r[-1])
        for r in sqlite3.connect(path).execute(
            "EXPLAIN QUERY PLAN SELECT r.item_id FROM results r WHERE r.run_id = 1"
            " ORDER BY r.severity, r.wrong_objects DESC, r.item_id LIMIT 50"
        )
    )
    assert "results_severity" in plan and "TEMP B-TREE" not in plan, plan
    store.close()
