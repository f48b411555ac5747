"""The local SQLite store: migrations, dataset versions, runs/results/scores, cache."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_eval.backends import DatasetBackend, get_dataset_backend
from extraction_eval.backends.local import (
    SAMPLE_DATASET,
    LocalStore,
    default_home,
    default_store_path,
)
from extraction_eval.backends.local.migrations import MIGRATIONS, migrate
from extraction_eval.errors import BackendError, NotFoundError, UsageError
from extraction_eval.llm.base import Completion, ResponseCache
from extraction_eval.types import (
    DatasetItem,
    Entity,
    Extraction,
    ItemResult,
    Relationship,
    Schema,
    Score,
    TaxonomyTag,
    Usage,
)

ALL = [m.__name__ for m in MIGRATIONS]


def _item(i: int, text: str | None = None, **kw: object) -> DatasetItem:
    return DatasetItem.model_validate(
        {
            "id": f"it-{i}",
            "text": text or f"Ann Lee {i} works for Acme.",
            "schema": Schema(entity_types=["person", "organization"]),
            "expected": Extraction(
                entities=[
                    Entity(name="Ann Lee", type="person", start=0, end=7, evidence="Ann Lee"),
                    Entity(name="Acme", type="organization"),
                ],
                relationships=[Relationship(source="Ann Lee", type="employed_by", target="Acme")],
            ),
            "metadata": {"n": i},
            **kw,
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path / "s.db", seed=False)
    yield s
    s.close()


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    """Names already applied, in the order they were applied (none: no table yet)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_migrations'").fetchone():
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


# --- location and migrations --------------------------------------------------------------


def test_default_path_follows_env(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_home() == isolated_home
    assert default_store_path() == isolated_home / "store.db"
    store = LocalStore()
    assert store.path == isolated_home / "store.db" and store.path.exists()
    store.close()
    monkeypatch.delenv("EXTRACTION_EVAL_HOME")
    assert default_home() == Path.home() / ".extraction-eval"


def test_migrations_are_named_in_order_and_append_only() -> None:
    assert ALL[0] == "m001_initial"
    assert sorted(ALL) == ALL and len(set(ALL)) == len(ALL)
    numbers = [int(name[1:4]) for name in ALL]
    assert all(name[0] == "m" and name[4] == "_" for name in ALL)
    assert numbers == list(range(1, len(ALL) + 1))  # no gaps, no reuse


def test_migrate_from_blank_creates_everything_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn) == ALL
    assert migrate(conn) == []
    assert applied_migrations(conn) == ALL
    conn.close()
    assert {"datasets", "items", "item_versions", "runs", "results", "scores"} <= _tables(path)
    assert "response_cache" in _tables(path)
    LocalStore(path, seed=False).close()  # opening again applies nothing and does not fail
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == ALL


def test_migrate_from_first_schema_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto="m001_initial") == ["m001_initial"]
    assert "runs" not in _tables(path)
    conn.execute(
        "INSERT INTO datasets (name, description, metadata, version, created_at, updated_at)"
        " VALUES ('old', 'from m001', '{}', 1, 't', 't')"
    )
    conn.execute("INSERT INTO items VALUES (1, 'a', 0, 't')")
    conn.execute(
        "INSERT INTO item_versions (dataset_id, item_id, version, input, expected_output,"
        " metadata, status, content_hash, created_at)"
        """ VALUES (1, 'a', 1, '{"text": "hi"}', '{"entities": [{"name": "hi", "type": "x"}]}',"""
        " '{}', 'ACTIVE', 'h', 't')"
    )
    conn.close()

    store = LocalStore(path)
    with sqlite3.connect(path) as check:
        assert [r[0] for r in check.execute("SELECT name FROM _migrations")] == ALL
    info = store.get_dataset("old")
    assert (info.description, info.version, info.item_count) == ("from m001", 1, 1)
    [item] = store.get_items("old")
    assert item.text == "hi" and item.expected.entities[0].name == "hi"
    run = store.create_run(name="r", dataset="old", dataset_version=1, config={})
    assert store.get_run("r") == run
    store.close()


def test_failed_migration_rolls_back_with_its_name(tmp_path: Path) -> None:
    def m999_broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    MIGRATIONS.append(m999_broken)
    try:
        conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        with pytest.raises(RuntimeError):
            migrate(conn)
        assert applied_migrations(conn) == []
        assert "datasets" not in _tables(tmp_path / "x.db")
        conn.close()
    finally:
        MIGRATIONS.remove(m999_broken)


def test_pragmas_wal_and_foreign_keys(store: LocalStore) -> None:
    conn = store._conn
    assert conn is not None
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_unopenable_file_is_a_backend_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a sqlite database at all" * 100)
    with pytest.raises(BackendError, match="cannot open local store"):
        LocalStore(bad)


def test_closed_store_raises_backend_error(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "c.db", seed=False)
    store.close()
    store.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        store.list_datasets()


# --- datasets -------------------------------------------------------------------------------


def test_sample_dataset_is_present_on_a_fresh_store_and_seeded_once() -> None:
    store = LocalStore()
    info = store.get_dataset(SAMPLE_DATASET)
    assert info.version == 1 and 40 <= info.item_count <= 50
    items = store.get_items(SAMPLE_DATASET)
    assert len(items) == info.item_count and items[0].id == "sample-001"
    store.close()
    store = LocalStore()  # second open: still version 1, nothing re-uploaded
    assert store.get_dataset(SAMPLE_DATASET).version == 1
    store.close()


def test_sample_false_opens_without_the_sample_and_seed_is_its_old_name(tmp_path: Path) -> None:
    """``sample`` says what it adds ("seed" also names the bootstrap's seed and a package);
    ``seed=`` still works for callers not moved yet, and wins when given."""
    for name, kwargs in (
        ("a", {"sample": False}),
        ("b", {"seed": False}),
        ("c", {"sample": True, "seed": False}),
    ):
        with LocalStore(tmp_path / f"{name}.db", **kwargs) as store:
            assert store.list_datasets() == [], kwargs
    with LocalStore(tmp_path / "d.db", sample=True) as store:
        assert store.get_dataset(SAMPLE_DATASET).version == 1


def test_user_dataset_named_like_the_sample_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "u.db"
    with LocalStore(path, seed=False) as store:
        store.upload_items(SAMPLE_DATASET, [_item(1)], description="mine")
    with LocalStore(path) as store:
        info = store.get_dataset(SAMPLE_DATASET)
        assert (info.description, info.item_count) == ("mine", 1)


def test_store_satisfies_dataset_backend_protocol(store: LocalStore) -> None:
    assert isinstance(store, DatasetBackend)
    backend = get_dataset_backend()
    assert isinstance(backend, LocalStore) and backend.path == default_store_path()
    backend.close()


def test_upload_creates_dataset_and_round_trips_items(store: LocalStore) -> None:
    items = [_item(i) for i in range(3)]
    report = store.upload_items("d", items, description="desc", metadata={"k": "v"})
    assert (report.created, report.updated, report.unchanged) == (3, 0, 0)
    assert report.new_version and report.dataset_created and report.version == 1
    assert store.get_items("d") == items
    info = store.get_dataset("d")
    assert (info.name, info.description, info.metadata) == ("d", "desc", {"k": "v"})
    assert (info.version, info.item_count) == (1, 3)
    assert info.created_at and info.created_at.endswith("+00:00")


def test_item_fields_survive_storage(store: LocalStore) -> None:
    item = _item(
        7,
        source_trace_id="tr-1",
        source_observation_id="ob-1",
    ).model_copy(update={"schema_": None})
    store.upload_items("d", [item])
    assert store.get_items("d") == [item]


def test_reupload_same_content_is_a_no_op(store: LocalStore) -> None:
    items = [_item(i) for i in range(3)]
    store.upload_items("d", items)
    before = store.get_dataset("d")
    report = store.upload_items("d", items)
    assert (report.created, report.updated, report.unchanged) == (0, 0, 3)
    assert not report.new_version and report.version == 1
    assert store.get_dataset("d").version == 1
    assert store.get_dataset("d").updated_at == before.updated_at


def test_reupload_updates_in_place_and_old_version_stays_readable(store: LocalStore) -> None:
    v1 = [_item(i) for i in range(3)]
    store.upload_items("d", v1)
    changed = _item(1, text="Bo Chen 1 works for Acme.")
    report = store.upload_items("d", [changed, _item(3), v1[2]])
    assert (report.created, report.updated, report.unchanged) == (1, 1, 1)
    assert report.version == 2 and report.new_version

    latest = store.get_items("d")
    # updated in place: same position, new content; the new item is appended
    assert [i.id for i in latest] == ["it-0", "it-1", "it-2", "it-3"]
    assert latest[1].text == "Bo Chen 1 works for Acme."
    assert store.get_items("d", version=1) == v1
    assert store.get_items("d", version=2) == latest
    assert store.get_dataset("d").item_count == 4


def test_archived_items_are_hidden_from_later_versions_only(store: LocalStore) -> None:
    store.upload_items("d", [_item(0), _item(1)])
    store.upload_items("d", [_item(1, status="ARCHIVED")])
    assert [i.id for i in store.get_items("d")] == ["it-0"]
    assert [i.id for i in store.get_items("d", version=1)] == ["it-0", "it-1"]
    assert store.get_dataset("d").item_count == 1


def test_description_update_without_new_items_keeps_version(store: LocalStore) -> None:
    store.upload_items("d", [_item(0)], description="a")
    report = store.upload_items("d", [_item(0)], description="b")
    assert not report.new_version
    assert store.get_dataset("d").description == "b"
    store.upload_items("d", [_item(0)])  # None leaves it alone
    assert store.get_dataset("d").description == "b"


def test_unknown_dataset_and_version_errors_name_what_exists(store: LocalStore) -> None:
    store.upload_items("alpha", [_item(0)])
    store.upload_items("beta", [_item(0)])
    with pytest.raises(NotFoundError) as exc:
        store.get_dataset("gamma")
    assert str(exc.value) == "dataset 'gamma' not found (known: alpha, beta)"
    with pytest.raises(NotFoundError, match="known: alpha, beta"):
        store.get_items("gamma")
    with pytest.raises(NotFoundError, match=r"no version 5 \(versions 1\.\.1\)"):
        store.get_items("alpha", version=5)
    with pytest.raises(NotFoundError):
        store.get_items("alpha", version=0)


def test_duplicate_ids_in_one_upload_are_rejected_atomically(store: LocalStore) -> None:
    with pytest.raises(UsageError, match="twice"):
        store.upload_items("d", [_item(0), _item(0)])
    assert store.list_datasets() == []


def test_list_datasets_sorted_with_counts(store: LocalStore) -> None:
    store.upload_items("b", [_item(0), _item(1)])
    store.upload_items("a", [_item(0)])
    assert [(d.name, d.item_count, d.version) for d in store.list_datasets()] == [
        ("a", 1, 1),
        ("b", 2, 1),
    ]


# --- runs, results, scores ------------------------------------------------------------------


def _result(item_id: str, *, ok: bool = True, f1: float = 0.5) -> ItemResult:
    if ok:
        return ItemResult(
            item_id=item_id,
            output=Extraction(
                entities=[Entity(name="Ann Lee", type="person", evidence="Ann Lee")],
                relationships=[Relationship(source="Ann Lee", type="employed_by", target="X")],
            ),
            raw_output='{"entities": []}',
            attempts=2,
            latency_ms=12.5,
            usage=Usage(tokens_in=10, tokens_out=5, cost_usd=0.0001),
            cache_hit=True,
            trace_id="trace-" + item_id,
            scores=[
                Score(name="entity_f1", value=f1),
                Score(name="extraction_error", value=False, data_type="BOOLEAN"),
                Score(name="category", value="ok", data_type="CATEGORICAL", comment="fine"),
            ],
        )
    return ItemResult(
        item_id=item_id,
        error="HTTP 500 from provider",
        error_kind="provider",
        attempts=4,
        scores=[
            Score(
                name="extraction_error",
                value=True,
                data_type="BOOLEAN",
                comment="HTTP 500 from provider",
            )
        ],
    )


def test_run_create_get_list_update(store: LocalStore) -> None:
    config = {"provider": "openai", "model": "gpt-x", "temperature": 0.0, "git": None}
    run = store.create_run(name="r1", dataset="d", dataset_version=2, config=config)
    assert (run.name, run.dataset, run.dataset_version, run.backend) == ("r1", "d", 2, "local")
    assert run.status == "running" and run.ended_at is None and run.summary is None
    assert run.config == config and run.started_at.endswith("+00:00")
    with pytest.raises(UsageError, match="already exists"):
        store.create_run(name="r1", dataset="d", dataset_version=2, config={})
    other = store.create_run(
        name="r1",
        dataset="e",
        dataset_version="2024-01-01T00:00:00Z",
        config={},
        backend="langfuse",
        experiment_id="exp-1",
    )
    assert other.dataset_version == "2024-01-01T00:00:00Z" and other.experiment_id == "exp-1"
    assert store.get_run("r1", "d") == run
    assert store.get_run("nope") is None
    with pytest.raises(UsageError, match="several datasets"):
        store.get_run("r1")
    assert [r.id for r in store.list_runs()] == [run.id, other.id]
    assert store.list_runs("e") == [other]

    store.update_run(run.id, config={"model": "m2"}, experiment_id="x", status="interrupted")
    got = store.get_run("r1", "d")
    assert got is not None
    assert (got.config, got.experiment_id, got.status) == ({"model": "m2"}, "x", "interrupted")
    with pytest.raises(UsageError, match="backend"):
        store.create_run(name="z", dataset="d", dataset_version=None, config={}, backend="x")
    with pytest.raises(NotFoundError):
        store.update_run(9999, status="x")


def test_results_and_scores_round_trip(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    ok, bad = _result("a"), _result("b", ok=False)
    store.record_result(run.id, ok)
    store.record_result(run.id, bad)
    assert store.results(run.id) == [ok, bad]
    got = store.results(run.id)[0].scores
    assert got[1].value is False and isinstance(got[0].value, float)

    run_scores = [
        Score(name="entity_f1", value=0.61, comment="micro"),
        Score(name="schema_failure_rate", value=0.0),
        Score(name="undefined", value=math.nan),
    ]
    store.finish_run(run.id, status="finished", run_scores=run_scores, summary={"n": 2})
    got_scores = store.run_scores(run.id)
    assert got_scores[:2] == run_scores[:2]
    assert math.isnan(float(got_scores[2].value))  # SQLite keeps NaN as NULL; we read NaN
    done = store.get_run("r")
    assert done is not None and done.status == "finished" and done.summary == {"n": 2}
    assert done.ended_at is not None and done.ended_at >= done.started_at
    # run-level scores are not item scores, and finishing again replaces them
    assert all(len(r.scores) <= 3 for r in store.results(run.id))
    store.finish_run(run.id, status="finished", run_scores=run_scores[:1], summary={})
    assert store.run_scores(run.id) == run_scores[:1]
    # resuming clears the end time
    store.update_run(run.id, status="running")
    resumed = store.get_run("r")
    assert resumed is not None and resumed.ended_at is None


def test_record_result_upserts_row_and_replaces_item_scores(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    store.record_result(run.id, _result("a", ok=False))
    store.record_result(run.id, _result("b"))
    retried = _result("a", f1=0.9)
    store.record_result(run.id, retried)
    results = store.results(run.id)
    assert [r.item_id for r in results] == ["a", "b"]  # one row per item, original order
    assert results[0] == retried and results[0].ok
    assert [s.name for s in results[0].scores] == ["entity_f1", "extraction_error", "category"]
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM scores WHERE item_id='a'").fetchone()[0] == 3


def test_a_result_for_a_missing_run_is_refused_by_name_and_nothing_is_written(
    store: LocalStore,
) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    with pytest.raises(NotFoundError, match=f"run id {run.id + 7} not found"):
        store.record_result(run.id + 7, _result("a"))
    with sqlite3.connect(store.path) as conn:
        for table in ("results", "scores", "result_taxonomy"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0


def test_a_retried_result_without_failure_categories_drops_the_earlier_ones(
    store: LocalStore,
) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    tag = TaxonomyTag(category="missed", kind="entity", side="gold", index=0, label="Ada")
    store.record_result(run.id, _result("a").model_copy(update={"taxonomy": [tag]}))
    store.record_result(run.id, _result("a").model_copy(update={"taxonomy": []}))
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM result_taxonomy").fetchone()[0] == 0
    assert store.results(run.id)[0].taxonomy == []


def test_iter_item_results_follows_the_given_ids_and_skips_those_without_a_result(
    store: LocalStore,
) -> None:
    """What a finished run reads its results with: the dataset's order, a batch at a time."""
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    for item_id in "abcde":
        store.record_result(run.id, _result(item_id))
    got = store.iter_item_results(run.id, ["d", "zz", "a", "e", "b"], batch_size=2)
    assert [r.item_id for r in got] == ["d", "a", "e", "b"]
    assert next(iter(store.iter_item_results(run.id, ["c"]))) == store.results(run.id)[2]
    with pytest.raises(UsageError, match="batch_size"):
        store.iter_item_results(run.id, ["a"], batch_size=0)
    with pytest.raises(NotFoundError):
        store.iter_item_results(run.id + 99, ["a"])


def test_each_result_is_committed_and_visible_to_another_connection(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    reader = sqlite3.connect(store.path)
    try:
        for i in range(3):
            store.record_result(run.id, _result(f"i{i}"))
            n = reader.execute("SELECT COUNT(*) FROM results WHERE run_id=?", (run.id,))
            assert n.fetchone()[0] == i + 1
        other = LocalStore(store.path, seed=False)
        assert [r.item_id for r in other.results(run.id)] == ["i0", "i1", "i2"]
        other.close()
    finally:
        reader.close()


def test_result_for_unknown_run_is_not_found(store: LocalStore) -> None:
    with pytest.raises(NotFoundError, match="run id 42"):
        store.record_result(42, _result("a"))
    with pytest.raises(NotFoundError):
        store.results(42)


def test_concurrent_record_result_from_threads(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})

    def work(k: int) -> None:
        for i in range(25):
            store.record_result(run.id, _result(f"{k}-{i}"))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = store.results(run.id)
    assert len(results) == 200 and all(len(r.scores) == 3 for r in results)


# --- response cache -------------------------------------------------------------------------


def test_cache_get_put(store: LocalStore) -> None:
    cache: ResponseCache = store.cache()
    assert cache.get("k") is None
    comp = Completion(text='{"entities": []}', model="gpt-x", usage=Usage(tokens_in=3))
    cache.put("k", comp)
    assert cache.get("k") == comp
    newer = Completion(text="{}", model="gpt-y")
    cache.put("k", newer)
    assert cache.get("k") == newer
    with LocalStore(store.path, seed=False) as other:  # persisted
        assert other.cache().get("k") == newer


def test_processes_opening_a_fresh_store_at_once_migrate_and_seed_once(tmp_path: Path) -> None:
    """Two CLI commands started together on a new machine must not trip over each other."""
    path = tmp_path / "race.db"
    code = (
        "import sys; from pathlib import Path; from extraction_eval.backends.local import "
        "LocalStore; s = LocalStore(Path(sys.argv[1])); "
        "print(s.get_dataset('extraction-eval').version)"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["1"] * 4
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == ALL
        assert conn.execute("SELECT COUNT(*) FROM dataset_versions").fetchone()[0] == 1


# --- failure taxonomy (m005_result_taxonomy) -------------------------------------------------


def _tagged(item_id: str, categories: list[str]) -> ItemResult:
    tags = [
        TaxonomyTag(
            category=c,
            kind="entity",
            side="gold" if c == "missed" else "pred",
            index=i,
            label=f"{item_id}-obj{i}",
            related=[0] if c == "wrong_type" else [],
            source_id="other-item" if c == "context_bleed" else None,
        )
        for i, c in enumerate(categories)
    ]
    return _result(item_id).model_copy(
        update={"taxonomy": tags, "trace_url": f"http://lf/project/p/traces/trace-{item_id}"}
    )


def test_migrate_from_blank_creates_result_taxonomy(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    conn.close()
    assert "result_taxonomy" in _tables(path)
    assert {"trace_url", "taxonomy_recorded"} <= columns


def test_migrate_from_previous_schema_keeps_results_with_taxonomy_unknown(tmp_path: Path) -> None:
    path = tmp_path / "m003.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto="m003_response_cache")[-1] == "m003_response_cache"
    conn.execute(
        "INSERT INTO runs (name, dataset, config, started_at) VALUES ('old', 'd', '{}', 't')"
    )
    conn.execute(
        "INSERT INTO results (run_id, item_id, output, attempts, trace_id, finished_at)"
        """ VALUES (1, 'a', '{"entities": [], "relationships": []}', 1, 'tr-a', 't')"""
    )
    conn.close()
    store = LocalStore(path, seed=False)
    [old] = store.results(1)
    assert old.trace_id == "tr-a" and old.trace_url is None
    assert old.taxonomy is None and old.categories == {}  # stored before m005: unknown
    store.record_result(1, _tagged("b", []))
    store.record_result(1, _tagged("c", ["missed"]))
    by_id = {r.item_id: r for r in store.results(1)}
    assert by_id["b"].taxonomy == [] and by_id["c"].categories == {"missed": 1}
    store.close()


def test_taxonomy_round_trips_and_is_replaced_with_the_result(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    a = _tagged("a", ["missed", "wrong_type", "missed", "context_bleed"])
    store.record_result(run.id, a)
    store.record_result(run.id, _tagged("b", ["spurious"]))
    store.record_result(run.id, _tagged("c", []))
    got = {r.item_id: r for r in store.results(run.id)}
    assert got["a"] == a  # every field of every object, in the scorer's order
    assert got["a"].categories == {"context_bleed": 1, "missed": 2, "wrong_type": 1}
    assert got["a"].trace_url == "http://lf/project/p/traces/trace-a"
    assert got["c"].taxonomy == []
    assert [r.item_id for r in store.results(run.id, category="missed")] == ["a"]
    assert [r.item_id for r in store.results(run.id, category="spurious")] == ["b"]
    assert store.results(run.id, category="reversed") == []
    store.record_result(run.id, _tagged("a", ["spurious"]))  # a retry replaces the taxonomy
    assert [r.item_id for r in store.results(run.id, category="spurious")] == ["a", "b"]
    assert store.results(run.id, category="missed") == []
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM result_taxonomy WHERE item_id='a'").fetchone()
        assert rows[0] == 1


def test_taxonomy_is_written_in_the_results_transaction(store: LocalStore) -> None:
    run = store.create_run(name="r", dataset="d", dataset_version=1, config={})
    store.record_result(run.id, _tagged("a", ["missed"]))
    bad = _tagged("a", ["spurious"]).model_copy(update={"scores": [Score(name="x", value=1.0)] * 2})
    with sqlite3.connect(store.path) as conn:  # make the taxonomy insert fail
        conn.execute(
            "CREATE TRIGGER no_spurious BEFORE INSERT ON result_taxonomy"
            " WHEN NEW.category = 'spurious' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    with pytest.raises(BackendError, match="refused"):
        store.record_result(run.id, bad)
    [kept] = store.results(run.id)  # row, scores and taxonomy all rolled back together
    assert kept == _tagged("a", ["missed"])


def test_items_by_ids_and_item_ids_read_one_dataset_version(store: LocalStore) -> None:
    store.upload_items("d", [_item(i) for i in range(5)])
    store.upload_items("d", [_item(1, text="Changed text."), _item(7)])  # version 2
    assert store.item_ids("d", version=1) == [f"it-{i}" for i in range(5)]
    assert store.item_ids("d") == [i.id for i in store.get_items("d")]
    wanted = ["it-7", "it-1", "it-3", "nope"]
    got = store.get_items_by_ids("d", wanted, version=2, batch_size=2)
    by_id = {i.id: i for i in store.get_items("d", version=2)}
    assert got == {k: by_id[k] for k in ("it-7", "it-1", "it-3")}  # "nope" left out
    old = store.get_items_by_ids("d", wanted, version=1)
    assert set(old) == {"it-1", "it-3"} and old["it-1"].text != got["it-1"].text
    with pytest.raises(NotFoundError, match="no version 3"):
        store.get_items_by_ids("d", ["it-1"], version=3)
    with pytest.raises(NotFoundError, match="no version 3"):
        store.item_ids("d", version=3)


def _steps_to_read_two(store: LocalStore) -> int:
    """SQLite VM steps (in units of 100, counted by a progress handler) that
    ``get_items_by_ids`` takes to read two items of dataset ``d``."""
    conn = store._conn
    assert conn is not None
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        got = store.get_items_by_ids("d", ["it-3", "it-1"])
    finally:
        conn.set_progress_handler(None, 100)
    assert list(got) == ["it-1", "it-3"]  # still in dataset order
    return steps


def test_items_by_ids_reads_the_ids_asked_for_not_the_whole_dataset(tmp_path: Path) -> None:
    # a compare of two 100,000-item runs reads its changed items 500 ids at a time: a query
    # that walked every item of the dataset per batch cost ~1.5 s of CPU there
    small = LocalStore(tmp_path / "small.db", seed=False)
    large = LocalStore(tmp_path / "large.db", seed=False)
    try:
        small.upload_items("d", [_item(i) for i in range(20)])
        large.upload_items("d", [_item(i) for i in range(2000)])
        assert _steps_to_read_two(large) <= 2 * _steps_to_read_two(small) + 5
    finally:
        small.close()
        large.close()
