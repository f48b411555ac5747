"""Named, append-only schema migrations for the local store (the simonw/llm pattern).

Each migration is a function ``mNNN_description(conn)``; the names already applied live in
``_migrations``. Never edit or reorder a released migration — add a new one at the end, so
every existing ``store.db`` reaches the same schema as a fresh one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` at the end of the list; its ``__name__`` is its permanent identity."""
    MIGRATIONS.append(fn)
    return fn


def _exec(conn: sqlite3.Connection, script: str) -> None:
    # Statement by statement (not executescript, which would COMMIT mid-migration): a failed
    # migration rolls back whole, together with its row in _migrations. complete_statement
    # keeps a ';' inside a comment or string literal from splitting a statement.
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            conn.execute(buffer)
            buffer = ""
    if buffer.strip(" \n;"):
        raise ValueError(f"incomplete SQL statement in migration: {buffer.strip()[:60]!r}")


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    """Datasets, their versions and items with full history (old versions stay readable)."""
    _exec(
        conn,
        """
        CREATE TABLE datasets (
            id          INTEGER PRIMARY KEY,
            name        TEXT NOT NULL UNIQUE,
            description TEXT,
            metadata    TEXT NOT NULL DEFAULT '{}',
            version     INTEGER NOT NULL DEFAULT 0,
            created_at  TEXT NOT NULL,
            updated_at  TEXT NOT NULL
        );
        CREATE TABLE dataset_versions (
            dataset_id  INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
            version     INTEGER NOT NULL,
            created_at  TEXT NOT NULL,
            created     INTEGER NOT NULL DEFAULT 0,
            updated     INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (dataset_id, version)
        );
        -- Identity and stable (insertion) order of an item; its content is in item_versions.
        CREATE TABLE items (
            dataset_id  INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
            id          TEXT NOT NULL,
            position    INTEGER NOT NULL,
            created_at  TEXT NOT NULL,
            PRIMARY KEY (dataset_id, id)
        );
        -- One row per change: the item as of dataset version `version` (until a later row).
        CREATE TABLE item_versions (
            dataset_id            INTEGER NOT NULL,
            item_id               TEXT NOT NULL,
            version               INTEGER NOT NULL,
            input                 TEXT NOT NULL,
            expected_output       TEXT NOT NULL,
            metadata              TEXT NOT NULL DEFAULT '{}',
            source_trace_id       TEXT,
            source_observation_id TEXT,
            status                TEXT NOT NULL DEFAULT 'ACTIVE'
                                  CHECK (status IN ('ACTIVE', 'ARCHIVED')),
            content_hash          TEXT NOT NULL,
            created_at            TEXT NOT NULL,
            PRIMARY KEY (dataset_id, item_id, version),
            FOREIGN KEY (dataset_id, item_id) REFERENCES items(dataset_id, id) ON DELETE CASCADE
        )
        """,
    )


@migration
def m002_runs(conn: sqlite3.Connection) -> None:
    """Runs, one result row per (run, item), and item- and run-level scores."""
    _exec(
        conn,
        """
        CREATE TABLE runs (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            name            TEXT NOT NULL,
            dataset         TEXT NOT NULL,      -- a name, not a FK: LangFuse datasets too
            dataset_version TEXT,               -- JSON: int, str or null
            backend         TEXT NOT NULL DEFAULT 'local',
            experiment_id   TEXT,
            config          TEXT NOT NULL DEFAULT '{}',
            status          TEXT NOT NULL DEFAULT 'running',
            started_at      TEXT NOT NULL,
            ended_at        TEXT,
            summary         TEXT,
            UNIQUE (dataset, name)
        );
        CREATE INDEX runs_name ON runs(name);
        CREATE TABLE results (
            run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            item_id     TEXT NOT NULL,
            output      TEXT,                   -- JSON extraction, null on error
            error       TEXT,
            error_kind  TEXT,
            raw_output  TEXT,
            attempts    INTEGER NOT NULL DEFAULT 0,
            latency_ms  REAL,
            tokens_in   INTEGER,
            tokens_out  INTEGER,
            cost_usd    REAL,
            cache_hit   INTEGER NOT NULL DEFAULT 0,
            trace_id    TEXT,
            finished_at TEXT NOT NULL,
            PRIMARY KEY (run_id, item_id)
        );
        CREATE TABLE scores (
            id          INTEGER PRIMARY KEY,
            run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            item_id     TEXT,                   -- null: a run-level score
            name        TEXT NOT NULL,
            value_num   REAL,
            value_str   TEXT,
            data_type   TEXT NOT NULL DEFAULT 'NUMERIC',
            comment     TEXT,
            created_at  TEXT NOT NULL
        );
        CREATE INDEX scores_run_item ON scores(run_id, item_id)
        """,
    )


@migration
def m003_response_cache(conn: sqlite3.Connection) -> None:
    """Completions by cache key, so re-running an unchanged config makes no model call."""
    _exec(
        conn,
        """
        CREATE TABLE response_cache (
            key         TEXT PRIMARY KEY,
            text        TEXT NOT NULL,
            model       TEXT NOT NULL,
            usage       TEXT NOT NULL DEFAULT '{}',
            created_at  TEXT NOT NULL
        )
        """,
    )


@migration
def m004_prompts(conn: sqlite3.Connection) -> None:
    """Prompt versions and labels, as in LangFuse prompt management (``latest`` is implied)."""
    _exec(
        conn,
        """
        -- One row per version; versions count from 1 per name and are never changed.
        CREATE TABLE prompt_versions (
            name            TEXT NOT NULL,
            version         INTEGER NOT NULL CHECK (version >= 1),
            messages        TEXT NOT NULL,      -- JSON chat: [{"role", "content"}, ...]
            content_hash    TEXT NOT NULL,      -- messages_hash(messages)
            config          TEXT NOT NULL DEFAULT '{}',
            commit_message  TEXT,
            created_at      TEXT NOT NULL,
            PRIMARY KEY (name, version)
        );
        -- A label points at exactly one version of its prompt; moving it is an UPDATE.
        CREATE TABLE prompt_labels (
            name        TEXT NOT NULL,
            label       TEXT NOT NULL,
            version     INTEGER NOT NULL,
            updated_at  TEXT NOT NULL,
            PRIMARY KEY (name, label),
            FOREIGN KEY (name, version) REFERENCES prompt_versions(name, version)
        )
        """,
    )


@migration
def m005_result_taxonomy(conn: sqlite3.Connection) -> None:
    """Each result's failure taxonomy (one row per object), queryable by category, and the
    result's trace URL (LangFuse mode). ``taxonomy_recorded`` tells a clean item (recorded, no
    rows) from a row stored before this migration (taxonomy unknown)."""
    _exec(
        conn,
        """
        ALTER TABLE results ADD COLUMN trace_url TEXT;
        ALTER TABLE results ADD COLUMN taxonomy_recorded INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE result_taxonomy (
            run_id      INTEGER NOT NULL,
            item_id     TEXT NOT NULL,
            position    INTEGER NOT NULL,       -- order given by the scorer
            category    TEXT NOT NULL,
            kind        TEXT NOT NULL,          -- entity | relationship
            side        TEXT NOT NULL,          -- gold | pred
            idx         INTEGER NOT NULL,       -- index into that side's list of that kind
            label       TEXT NOT NULL,
            related     TEXT NOT NULL DEFAULT '[]',  -- JSON list of gold indices
            source_id   TEXT,
            PRIMARY KEY (run_id, item_id, position),
            FOREIGN KEY (run_id, item_id) REFERENCES results(run_id, item_id) ON DELETE CASCADE
        );
        CREATE INDEX result_taxonomy_category ON result_taxonomy(run_id, category)
        """,
    )


@migration
def m006_gold(conn: sqlite3.Connection) -> None:
    """Ensemble gold: human overrides (applied on top of the vote at every build) and each
    item's last aggregate with its ballots (what ``gold review`` shows; ``input_hash`` says
    whether a rebuild must re-vote it)."""
    _exec(
        conn,
        """
        CREATE TABLE gold_overrides (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            dataset     TEXT NOT NULL,
            item_id     TEXT NOT NULL,
            action      TEXT NOT NULL,          -- add | remove | set
            kind        TEXT NOT NULL,          -- entity | relationship
            target      TEXT,                   -- entity name or "source|type|target"
            field       TEXT,                   -- set: name, type, evidence, attributes.<key>
            value       TEXT,                   -- set: the value; add: the object as JSON
            reason      TEXT NOT NULL,
            author      TEXT,
            created_at  TEXT NOT NULL
        );
        CREATE INDEX gold_overrides_item ON gold_overrides(dataset, item_id);
        CREATE TABLE gold_aggregates (
            dataset     TEXT NOT NULL,
            item_id     TEXT NOT NULL,
            input_hash  TEXT NOT NULL,          -- raw-answer keys + vote settings + overrides
            aggregate   TEXT NOT NULL,          -- JSON: the ItemVote and applied overrides
            built_at    TEXT NOT NULL,
            PRIMARY KEY (dataset, item_id)
        )
        """,
    )


@migration
def m007_batches(conn: sqlite3.Connection) -> None:
    """The Batch API ledger: every submitted batch and the requests (custom ids = response-cache
    keys) it covers, written before polling, so an interrupted command resumes instead of
    paying again."""
    _exec(
        conn,
        """
        CREATE TABLE batches (
            batch_id       TEXT PRIMARY KEY,
            owner          TEXT NOT NULL,
            status         TEXT NOT NULL,
            input_file_id  TEXT,
            created_at     TEXT NOT NULL,
            updated_at     TEXT NOT NULL
        );
        CREATE TABLE batch_requests (
            batch_id   TEXT NOT NULL REFERENCES batches(batch_id) ON DELETE CASCADE,
            custom_id  TEXT NOT NULL,
            PRIMARY KEY (batch_id, custom_id)
        );
        CREATE INDEX batch_requests_custom_id ON batch_requests(custom_id)
        """,
    )


@migration
def m008_result_counts(conn: sqlite3.Connection) -> None:
    """Each result's paired-comparison counts as the runner scored them (JSON: the scoring key
    they were made with, the item's count row and its per-type counts), so ``compare`` reads
    them instead of re-scoring; NULL for rows stored before (they are re-scored)."""
    _exec(conn, "ALTER TABLE results ADD COLUMN counts TEXT")


@migration
def m009_item_position_index(conn: sqlite3.Connection) -> None:
    """Items by dataset position: a run reads its dataset a page at a time in that order
    (keyset paging), which without this index is a full scan and sort per page."""
    _exec(conn, "CREATE INDEX items_position ON items(dataset_id, position)")


@migration
def m010_result_severity(conn: sqlite3.Connection) -> None:
    """Each result's severity (``evaluators.severity``): its combined F1 (-1 when it errored)
    and its count of wrong objects, indexed per run, so ``runs show`` and ``--worst`` read one
    page in that order instead of sorting every row. Rows stored before are filled here."""
    _exec(
        conn,
        """
        ALTER TABLE results ADD COLUMN severity REAL NOT NULL DEFAULT 0;
        ALTER TABLE results ADD COLUMN wrong_objects INTEGER NOT NULL DEFAULT 0;
        UPDATE results SET
            severity = CASE WHEN error IS NOT NULL THEN -1.0 ELSE COALESCE(
                (SELECT AVG(f1) FROM (
                    SELECT (SELECT s.value_num FROM scores s WHERE s.run_id = results.run_id
                            AND s.item_id = results.item_id AND s.name = n.name
                            AND s.value_str IS NULL AND s.data_type != 'BOOLEAN'
                            ORDER BY s.id LIMIT 1) AS f1
                    FROM (SELECT 'entity_f1' AS name UNION ALL SELECT 'relationship_f1') n
                )), 0.0) END,
            wrong_objects = (SELECT COUNT(*) FROM result_taxonomy t
                             WHERE t.run_id = results.run_id AND t.item_id = results.item_id);
        CREATE INDEX results_severity
            ON results(run_id, severity, wrong_objects DESC, item_id)
        """,
    )


@migration
def m011_dataset_schema(conn: sqlite3.Connection) -> None:
    """A dataset's own schema (JSON; NULL: none): items without a schema of their own are
    run and scored with it (``datasets upload --schema``)."""
    _exec(conn, "ALTER TABLE datasets ADD COLUMN schema TEXT")


@migration
def m012_run_locks(conn: sqlite3.Connection) -> None:
    """Who is running a run now: one row while a process runs its items (local or LangFuse
    mode, as recorded here), so a second process resuming it is refused instead of running
    every item again. ``token`` tells two holders in one process apart."""
    _exec(
        conn,
        """
        CREATE TABLE run_locks (
            run_id      INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
            token       TEXT NOT NULL,
            pid         INTEGER NOT NULL,
            host        TEXT NOT NULL,
            proc_start  TEXT,                   -- the process's start time (pid reuse), if known
            started_at  TEXT NOT NULL
        )
        """,
    )


@migration
def m013_result_repairs(conn: sqlite3.Connection) -> None:
    """What reading each model reply repaired (JSON list: fence, prose, wrapper; NULL: none,
    or a row stored before), so runs show, exports and the summary can say so."""
    _exec(conn, "ALTER TABLE results ADD COLUMN repairs TEXT")


@migration
def m014_review_candidates(conn: sqlite3.Connection) -> None:
    """Review queues: each candidate triage sent to a queue (once per queue and key), where it
    went (a LangFuse queue item, or the local review file), and the verdict applied from it,
    so re-running triage adds nothing twice and apply-reviews applies nothing twice."""
    _exec(
        conn,
        """
        CREATE TABLE review_candidates (
            queue           TEXT NOT NULL,
            key             TEXT NOT NULL,
            dataset         TEXT NOT NULL,
            item_id         TEXT NOT NULL,
            run             TEXT NOT NULL,
            candidate       TEXT NOT NULL,      -- JSON (evaluators.review.Candidate.to_json)
            queue_item_id   TEXT,               -- LangFuse mode: the annotation queue item
            created_at      TEXT NOT NULL,
            applied_verdict TEXT,
            applied_by      TEXT,
            applied_version TEXT,
            applied_at      TEXT,
            PRIMARY KEY (queue, key)
        );
        CREATE INDEX review_candidates_item ON review_candidates (queue, queue_item_id)
        """,
    )


@migration
def m015_judge_calibrations(conn: sqlite3.Connection) -> None:
    """Each ``judge calibrate``: the judge's identity (model, endpoint, prompt version), the
    pairs it was measured on, its 2x2 counts and kappa with its interval, so every judged
    figure can say which calibration backs it."""
    _exec(
        conn,
        """
        CREATE TABLE judge_calibrations (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            judge       TEXT NOT NULL,
            source      TEXT NOT NULL DEFAULT '',
            pairs       INTEGER NOT NULL,
            kappa       REAL,
            report      TEXT NOT NULL,          -- JSON: Calibration.to_json()
            created_at  TEXT NOT NULL
        );
        CREATE INDEX judge_calibrations_judge ON judge_calibrations(judge, id)
        """,
    )


@migration
def m016_run_judged(conn: sqlite3.Connection) -> None:
    """A run's judged figures (``--judge`` on run, compare, matrix): the judged block by judge
    identity, with each item's judged matches and their reasons, so ``runs show`` shows them
    beside the run's string figures (which are never changed)."""
    _exec(
        conn,
        """
        CREATE TABLE run_judged (
            run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            judge       TEXT NOT NULL,
            report      TEXT NOT NULL,          -- JSON: the judged block
            items       TEXT NOT NULL,          -- JSON: {item id: its judged matches}
            created_at  TEXT NOT NULL,
            PRIMARY KEY (run_id, judge)
        )
        """,
    )


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )


def migrate(conn: sqlite3.Connection, *, upto: str | None = None) -> list[str]:
    """Apply every migration not yet applied (up to and including ``upto``); return their names.

    The connection must be in autocommit mode (``isolation_level=None``). All pending
    migrations run in one ``BEGIN IMMEDIATE`` transaction, so two processes opening a fresh
    store at once cannot both apply the same migration.
    """
    names = [m.__name__ for m in MIGRATIONS]
    if upto is not None and upto not in names:
        raise ValueError(f"unknown migration {upto!r}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        _ensure_table(conn)
        done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        newly: list[str] = []
        for fn in MIGRATIONS:
            name = fn.__name__
            if name not in done:
                fn(conn)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                    (name, datetime.now(UTC).isoformat(timespec="milliseconds")),
                )
                newly.append(name)
            if name == upto:
                break
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return newly
