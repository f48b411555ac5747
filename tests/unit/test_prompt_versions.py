"""Local prompt versions and labels: the m004 migration and LangFuse's rules in the store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.migrations import MIGRATIONS, migrate
from extraction_eval.errors import InvalidValue, NotFoundError, UsageError
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.prompts.template import load_local_prompt, messages_hash
from extraction_eval.prompts.versions import select_run_prompt
from extraction_eval.types import Schema

ALL = [m.__name__ for m in MIGRATIONS]
V1 = [
    {"role": "system", "content": "Find {{entity_types}}; relations {{relationship_types}}."},
    {"role": "user", "content": "<text>{{text}}</text>"},
]
V2 = [{"role": "user", "content": "Only the text: {{text}}"}]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path / "s.db", seed=False)
    yield s
    s.close()


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_m004_from_blank_creates_the_prompt_tables(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert "m004_prompts" in migrate(conn)
    conn.close()
    assert {"prompt_versions", "prompt_labels"} <= _tables(path)


def test_m004_from_the_previous_schema_keeps_runs_and_adds_prompts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto="m003_response_cache")[-1] == "m003_response_cache"
    conn.execute(
        "INSERT INTO runs (name, dataset, config, started_at) VALUES ('r', 'd', '{}', 't')"
    )
    conn.close()
    assert "prompt_versions" not in _tables(path)

    store = LocalStore(path, seed=False)
    with sqlite3.connect(path) as check:
        assert [r[0] for r in check.execute("SELECT name FROM _migrations")] == ALL
    assert store.get_run("r", "d") is not None
    assert store.push_prompt("extraction", V1, labels=["staging"]).version == 1
    assert store.get_prompt("extraction", label="staging").messages == V1
    store.close()


def test_versions_count_per_name_and_labels_move(store: LocalStore) -> None:
    first = store.push_prompt("extraction", V1, labels=["staging", "production"])
    assert (first.version, first.created, first.labels) == (1, True, ("staging", "production"))
    assert store.push_prompt("other", V1).version == 1  # numbering is per prompt name
    second = store.push_prompt("extraction", V2, labels=["staging"], commit_message="shorter")
    assert (second.version, second.created) == (2, True)

    staging = store.get_prompt("extraction", label="staging")
    assert (staging.version, staging.label, staging.source) == (2, "staging", "local-store")
    assert staging.messages == V2 and staging.content_hash == messages_hash(V2)
    # a label points at one version: staging left v1, production stayed there
    versions = store.prompt_versions("extraction")
    assert [(v.version, v.labels) for v in versions] == [
        (1, ("production",)),
        (2, ("latest", "staging")),
    ]
    assert versions[1].commit_message == "shorter" and versions[0].commit_message is None
    assert store.get_prompt("extraction").version == 1  # neither: production, as LangFuse
    assert store.get_prompt("extraction", version=1).messages == V1
    [extraction, other] = store.list_prompts()
    assert (extraction.name, extraction.versions, extraction.latest) == ("extraction", 2, 2)
    assert extraction.labels == {"latest": 2, "production": 1, "staging": 2}
    assert other.labels == {"latest": 1}


def test_latest_is_always_the_newest_version_and_cannot_be_set(store: LocalStore) -> None:
    store.push_prompt("extraction", V1, labels=["production"])
    store.push_prompt("extraction", V2)  # no label: only 'latest' points at it
    latest = store.get_prompt("extraction", label="latest")
    assert (latest.version, latest.messages) == (2, V2)
    with pytest.raises(UsageError, match="'latest' always means the newest"):
        store.push_prompt("extraction", V1, labels=["latest"])
    with pytest.raises(UsageError, match="invalid prompt label 'Prod'"):
        store.push_prompt("extraction", V1, labels=["Prod"])
    assert len(store.prompt_versions("extraction")) == 2  # refused pushes stored nothing


def test_identical_push_adds_no_version_but_moves_labels(store: LocalStore) -> None:
    store.push_prompt("extraction", V1, labels=["staging"])
    again = store.push_prompt("extraction", V1, labels=["production"])
    assert (again.version, again.created) == (1, False)
    assert store.get_prompt("extraction", label="production").version == 1
    store.push_prompt("extraction", V2, labels=["staging"])
    # same words as v1 but v1 is not the newest: a new version, as LangFuse would make
    back = store.push_prompt("extraction", V1, labels=["staging"])
    assert (back.version, back.created) == (3, True)
    forced = store.push_prompt("extraction", V1, force=True)
    assert (forced.version, forced.created) == (4, True)
    configured = store.push_prompt("extraction", V1, config={"temperature": 0})
    assert (configured.version, configured.created) == (5, True)  # config is part of it
    assert store.prompt_versions("extraction")[-1].config == {"temperature": 0}


def test_unknown_prompt_label_or_version_is_a_one_line_not_found(store: LocalStore) -> None:
    with pytest.raises(NotFoundError, match=r"prompt 'extraction' not found.*none pushed yet"):
        store.get_prompt("extraction", label="staging")
    store.push_prompt("extraction", V1, labels=["staging"])
    with pytest.raises(NotFoundError, match=r"no label 'nope'.*\(labels: latest, staging\)"):
        store.get_prompt("extraction", label="nope")
    with pytest.raises(NotFoundError, match="no label 'production'"):
        store.get_prompt("extraction")
    with pytest.raises(NotFoundError, match=r"no version 7 .*\(versions 1..1\)"):
        store.get_prompt("extraction", version=7)
    with pytest.raises(NotFoundError, match=r"prompt 'x' not found.*known: extraction"):
        store.get_prompt("x", label="staging")
    with pytest.raises(UsageError, match="not both"):
        store.get_prompt("extraction", label="staging", version=1)


def test_a_prompt_without_the_text_variable_is_refused(store: LocalStore) -> None:
    with pytest.raises(UsageError, match=r"no \{\{text\}\} variable"):
        store.push_prompt("extraction", [{"role": "user", "content": "Extract things."}])
    with pytest.raises(UsageError, match="prompt message 1"):
        store.push_prompt("extraction", [{"role": "robot", "content": "{{text}}"}])
    with pytest.raises(UsageError, match="at least one message"):
        store.push_prompt("extraction", [])
    with pytest.raises(UsageError, match="name must not be empty"):
        store.push_prompt(" ", V1)


def test_stored_prompt_compiles_like_the_bundled_one(store: LocalStore) -> None:
    bundled = load_local_prompt()
    store.push_prompt("extraction", bundled.messages, labels=["staging"])
    stored = store.get_prompt("extraction", label="staging")
    assert stored.content_hash == bundled.content_hash  # same words, same cache key
    schema = Schema(entity_types=["person"], relationship_types=["knows"])
    assert stored.compile("Ada met Bob.", schema) == bundled.compile("Ada met Bob.", schema)


def test_run_prompt_selection_is_explicit(store: LocalStore) -> None:
    assert select_run_prompt(store, PipelineConfig(model="fake:x")).source == "bundled"
    store.push_prompt("extraction", V2, labels=["staging"])
    chosen = select_run_prompt(store, PipelineConfig(model="fake:x", prompt_label="staging"))
    assert (chosen.source, chosen.version, chosen.messages) == ("local-store", 1, V2)
    by_version = select_run_prompt(store, PipelineConfig(model="fake:x", prompt_version=1))
    assert (by_version.version, by_version.label) == (1, None)
    with pytest.raises(NotFoundError, match="no label 'prod'"):
        select_run_prompt(store, PipelineConfig(model="fake:x", prompt_label="prod"))
    # a pipeline that sends no prompt must not look as if the labelled prompt ran
    with pytest.raises(InvalidValue, match="prompt_label has no effect: offline:baseline") as e:
        select_run_prompt(store, PipelineConfig(prompt_label="staging"))
    assert e.value.field == "prompt_label"  # the CLI shows it as --prompt-label
    with pytest.raises(InvalidValue, match="has no effect: your own pipeline function") as e:
        select_run_prompt(store, PipelineConfig(pipeline="m:f", prompt_version=1))
    assert e.value.field == "prompt_version"
