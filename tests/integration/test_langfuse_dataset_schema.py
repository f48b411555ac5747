"""A dataset's schema in LangFuse mode lives in the dataset's metadata (``schema``): what the
loopback server receives on upload, what a reader gets back, and what a run is scored with."""

from __future__ import annotations

from typing import Any

import pytest

from extraction_eval.backends.langfuse import LangfuseDatasetBackend
from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.types import DatasetItem, Entity, Extraction, Schema
from tests.support.langfuse_env import use_langfuse
from tests.support.langfuse_server import FakeLangfuse

SCHEMA = Schema(entity_types=["Peop", "Org"], labels={"Peop": "person", "Org": "organization"})
WIRE = {
    "entity_types": ["Peop", "Org"],
    "relationship_types": [],
    "labels": {"Peop": "person", "Org": "organization"},
}


def _items() -> list[DatasetItem]:
    return [
        DatasetItem(
            id="a",
            text="Ada Lovelace worked at Acme.",
            expected=Extraction(entities=[Entity(name="Ada Lovelace", type="Peop")]),
        )
    ]


def test_upload_puts_the_schema_in_the_datasets_metadata(server: FakeLangfuse, lf: Any) -> None:
    backend = LangfuseDatasetBackend(lf)
    report = backend.upload_items("s", _items(), metadata={"owner": "ana"}, schema=SCHEMA)
    assert report.schema_changed and report.dataset_created
    (created,) = server.requests_to("/api/public/v2/datasets", "POST")
    assert created.body["metadata"] == {"owner": "ana", "schema": WIRE}
    assert backend.get_dataset("s").schema == SCHEMA
    assert backend.load_for_run("s").schema == SCHEMA
    # the same schema again sends no dataset update; another one updates that key only
    backend.upload_items("s", _items(), schema=SCHEMA)
    assert len(server.requests_to("/api/public/v2/datasets", "POST")) == 1
    other = Schema(labels={"Peop": "human"})
    assert backend.upload_items("s", _items(), schema=other).schema_changed
    updated = server.requests_to("/api/public/v2/datasets", "POST")[-1]
    assert updated.body["metadata"] == {
        "owner": "ana",
        "schema": {"entity_types": [], "relationship_types": [], "labels": {"Peop": "human"}},
    }
    assert backend.get_dataset("s").schema == other
    assert [d.schema for d in backend.list_datasets() if d.name == "s"] == [other]


def test_a_langfuse_mode_run_is_scored_with_the_datasets_schema(
    server: FakeLangfuse, lf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items(SAMPLE_DATASET)[:4]
    renamed = [
        item.model_copy(
            update={
                "schema_": None,
                "expected": item.expected.model_copy(
                    update={
                        "entities": [
                            e.model_copy(update={"type": "Peop"})
                            for e in item.expected.entities
                            if e.type == "person"
                        ]
                    }
                ),
            }
        )
        for item in items
    ]
    LangfuseDatasetBackend(lf).upload_items(
        "lf-labels", renamed, schema=Schema(entity_types=["Peop"], labels={"Peop": "person"})
    )
    use_langfuse(server, monkeypatch, "labels-run")
    outcome = run_experiment(RunConfig(dataset="lf-labels", name="mapped"))
    assert outcome.run.config["dataset_schema"]["labels"] == {"Peop": "person"}
    report = outcome.summary.report
    assert report["entities_typed"]["tp"] > 0 and report["label_mismatch"] is None
    assert "person" in report["per_type"]["entities"]
