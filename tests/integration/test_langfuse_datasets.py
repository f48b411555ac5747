"""LangFuse datasets through the real SDK: idempotent upload, faithful round trip, versions."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from extraction_eval.backends.base import DatasetBackend
from extraction_eval.backends.langfuse import (
    META_KEY,
    LangfuseDatasetBackend,
    langfuse_item_id,
)
from extraction_eval.errors import BackendError, InvalidValue, NotFoundError, UsageError
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Schema
from tests.support.langfuse_server import FakeLangfuse


def _items() -> list[DatasetItem]:
    ada = Entity(name="Ada Lovelace", type="person", evidence="Ada Lovelace worked", start=0)
    acme = Entity(name="Acme", type="organization", attributes={"city": "London"})
    return [
        DatasetItem(
            id="doc-1",
            text="Ada Lovelace worked at Acme.",
            schema=Schema(entity_types=["person", "organization"], relationship_types=["works"]),
            expected=Extraction(
                entities=[ada, acme],
                relationships=[Relationship(source="Ada Lovelace", type="works", target="Acme")],
            ),
            metadata={"split": "test", "difficulty": 2},
        ),
        DatasetItem(id="doc-2", text="Nothing happens here."),
        DatasetItem(
            id="doc-3",
            text="Bob met Carol.",
            expected=Extraction(entities=[Entity(name="Bob", type="person")]),
            source_trace_id="a" * 32,
            source_observation_id="b" * 16,
        ),
    ]


def test_backend_satisfies_the_protocol(lf: Any) -> None:
    assert isinstance(LangfuseDatasetBackend(lf), DatasetBackend)


def test_upload_twice_does_not_duplicate_and_sends_nothing_the_second_time(
    server: FakeLangfuse, lf: Any
) -> None:
    backend = LangfuseDatasetBackend(lf)
    first = backend.upload_items("eval/main", _items(), description="gold", metadata={"v": 1})
    assert (first.created, first.updated, first.unchanged) == (3, 0, 0)
    assert first.dataset_created and first.new_version and first.version
    posts = server.requests_to("/api/public/dataset-items", "POST")
    assert len(posts) == 3
    assert {p.body["id"] for p in posts} == {
        langfuse_item_id("eval/main", f"doc-{i}") for i in (1, 2, 3)
    }
    assert posts[0].body["input"] == {
        "text": "Ada Lovelace worked at Acme.",
        "schema": {"entity_types": ["person", "organization"], "relationship_types": ["works"]},
    }
    assert set(posts[0].body["expectedOutput"]) == {"entities", "relationships"}
    assert posts[2].body["sourceTraceId"] == "a" * 32
    assert posts[2].body["sourceObservationId"] == "b" * 16
    dataset_posts = server.requests_to("/api/public/v2/datasets", "POST")
    assert [p.body["name"] for p in dataset_posts] == ["eval/main"]
    assert dataset_posts[0].body["description"] == "gold"

    second = backend.upload_items("eval/main", _items())
    assert (second.created, second.updated, second.unchanged) == (0, 0, 3)
    assert not second.new_version and not second.dataset_created
    assert second.version == first.version
    assert len(server.requests_to("/api/public/dataset-items", "POST")) == 3  # nothing resent
    assert len(server.dataset_items("eval/main")) == 3


def test_changed_item_is_updated_in_place_under_the_same_id(server: FakeLangfuse, lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    backend.upload_items("ds", _items())
    changed = [*_items()[:1], _items()[1].model_copy(update={"text": "Now Dan arrives."})]
    report = backend.upload_items("ds", changed)
    assert (report.created, report.updated, report.unchanged) == (0, 1, 1)
    assert len(server.dataset_items("ds")) == 3
    texts = {i.id: i.text for i in backend.get_items("ds")}
    assert texts["doc-2"] == "Now Dan arrives."


def test_round_trip_restores_items_ids_metadata_and_order(server: FakeLangfuse, lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    items = _items()
    backend.upload_items("rt", items)
    back = backend.get_items("rt")
    assert back == items  # same ids (not the LangFuse ones), same order, same content
    assert all(s["metadata"][META_KEY]["item_id"] for s in server.dataset_items("rt"))
    # the server lists newest first; the backend restores upload order
    served = [it.metadata[META_KEY]["item_id"] for it in lf.get_dataset("rt").items]
    assert served == ["doc-3", "doc-2", "doc-1"]


def test_get_dataset_and_list_report_counts_and_version(server: FakeLangfuse, lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    report = backend.upload_items("a-ds", _items(), description="first", metadata={"team": "x"})
    backend.upload_items("b-ds", _items()[:1])
    info = backend.get_dataset("a-ds")
    assert (info.name, info.description, info.metadata) == ("a-ds", "first", {"team": "x"})
    assert info.item_count == 3 and info.version == report.version
    listed = backend.list_datasets()
    assert [(d.name, d.item_count) for d in listed] == [("a-ds", 3), ("b-ds", 1)]


def test_version_timestamp_reads_the_items_as_they_were(server: FakeLangfuse, lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    v1 = backend.upload_items("versioned", _items()[:2]).version
    assert isinstance(v1, str)
    backend.upload_items("versioned", _items())
    assert len(backend.get_items("versioned")) == 3
    assert [i.id for i in backend.get_items("versioned", version=v1)] == ["doc-1", "doc-2"]
    assert server.requests_to("/api/public/dataset-items", "GET")[-1].param("version")
    with pytest.raises(UsageError, match="must be a timestamp for a LangFuse dataset") as info:
        backend.get_items("versioned", version=1)
    assert isinstance(info.value, InvalidValue) and info.value.field == "version"


def test_archived_items_are_not_served(lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    archived = _items()[1].model_copy(update={"status": "ARCHIVED"})
    backend.upload_items("arch", [_items()[0], archived])
    assert [i.id for i in backend.get_items("arch")] == ["doc-1"]
    assert backend.get_dataset("arch").item_count == 1


def test_backend_from_env_owns_its_client(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    public, secret = server.new_keys("from-env")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    backend = LangfuseDatasetBackend.from_env()
    try:
        backend.upload_items("env-ds", _items()[:1])
        assert [d.name for d in backend.list_datasets()] == ["env-ds"]
    finally:
        backend.close()
    assert server.requests_to("/api/public/projects")[0].public_key == public  # key-checked


def test_missing_dataset_is_not_found(lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    with pytest.raises(NotFoundError, match="'nope'"):
        backend.get_items("nope")
    with pytest.raises(NotFoundError):
        backend.get_dataset("nope")


def test_long_ids_stay_within_the_limit_and_round_trip(server: FakeLangfuse, lf: Any) -> None:
    long_id = "x" * 300
    backend = LangfuseDatasetBackend(lf)
    backend.upload_items("long", [DatasetItem(id=long_id, text="t")])
    (posted,) = server.requests_to("/api/public/dataset-items", "POST")
    assert len(posted.body["id"]) <= 255
    assert [i.id for i in backend.get_items("long")] == [long_id]
    assert langfuse_item_id("long", long_id) == posted.body["id"]  # deterministic


def test_items_made_elsewhere_are_normalised_at_the_edge(server: FakeLangfuse, lf: Any) -> None:
    lf.create_dataset(name="ui-made")
    lf.create_dataset_item(
        dataset_name="ui-made", id="plain", input="Just text.", expected_output=None
    )
    lf.create_dataset_item(
        dataset_name="ui-made",
        id="as-json",
        input={"text": "Eve."},
        expected_output='{"entities": [{"name": "Eve", "type": "person"}]}',
    )
    items = {i.id: i for i in LangfuseDatasetBackend(lf).get_items("ui-made")}
    assert items["plain"].text == "Just text." and items["plain"].expected == Extraction()
    assert items["as-json"].expected.entities[0].name == "Eve"
    lf.create_dataset_item(dataset_name="ui-made", id="bad", input={"question": "?"})
    with pytest.raises(UsageError, match="bad: input has no 'text'"):
        LangfuseDatasetBackend(lf).get_items("ui-made")


def test_duplicate_ids_in_one_upload_are_refused_before_sending(
    server: FakeLangfuse, lf: Any
) -> None:
    with pytest.raises(UsageError, match="twice"):
        LangfuseDatasetBackend(lf).upload_items("dup", [_items()[0], _items()[0]])
    assert server.requests == []


def test_rejected_request_is_one_backend_error_line_without_the_sdk_noise(
    server: FakeLangfuse, lf: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_next("/api/public/v2/datasets", 1, status=400, method="POST")
    with caplog.at_level(logging.WARNING), pytest.raises(BackendError) as err:
        LangfuseDatasetBackend(lf).upload_items("refused", _items()[:1])
    assert str(err.value) == (
        f"LangFuse at {server.base_url} answered 400 while creating dataset 'refused':"
        " fake fault 400"
    )
    # the SDK logs a generic line for the same 400 before raising; ours replaces it
    assert not [r for r in caplog.records if r.funcName == "handle_fern_exception"]
    lf.create_dataset(name="unfiltered")  # outside our translation the SDK's line stays
    server.fail_next("/api/public/v2/datasets", 1, status=400, method="POST")
    with pytest.raises(Exception, match="fake fault"):
        lf.create_dataset(name="unfiltered")
    assert [r for r in caplog.records if r.funcName == "handle_fern_exception"]


def test_rate_limited_upload_is_retried_by_the_sdk(server: FakeLangfuse, lf: Any) -> None:
    server.fail_next("/api/public/dataset-items", 1, status=429, retry_after="1", method="POST")
    report = LangfuseDatasetBackend(lf).upload_items("limited", _items()[:1])
    assert report.created == 1
    statuses = [r.status for r in server.requests_to("/api/public/dataset-items", "POST")]
    assert statuses == [429, 200]
    assert len(server.dataset_items("limited")) == 1
