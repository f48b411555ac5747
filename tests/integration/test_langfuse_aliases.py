"""Matches made through a gold entity's mention reach LangFuse: the item scores' comments say
how many (``via alias=N``), as the fake server received them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import _run_app
from extraction_eval.types import DatasetItem, Entity, Extraction, Mention, Relationship
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATASET = "aliases-lf"


def _items() -> list[DatasetItem]:
    schneider = Entity(
        name='Wilfried "Willi" Schneider',
        type="PER",
        mentions=[
            Mention(name='Wilfried "Willi" Schneider', start=0, end=26),
            Mention(name="Schneider"),
        ],
    )
    germany = Entity(name="Germany", type="LOC", mentions=[Mention(name="Deutschland")])
    rel = Relationship(source=schneider.name, type="country", target="Germany", head=0, tail=1)
    return [
        DatasetItem(
            id="d1",
            text='Wilfried "Willi" Schneider is a German racer. Schneider lives in Deutschland.',
            expected=Extraction(entities=[schneider, germany], relationships=[rel]),
        )
    ]


def test_alias_matches_are_in_the_score_comments_langfuse_received(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(server, _items(), DATASET)
    stored = server.dataset_items(DATASET)
    assert stored[0]["expectedOutput"]["entities"][0]["mentions"][1]["name"] == "Schneider"
    use_langfuse(server, monkeypatch, "aliases")
    result = CliRunner().invoke(
        _run_app,
        ["--dataset", DATASET, "--name", "by-mention", "--pipeline",
         "tests.support.pipelines:by_mention"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    scores = {s["name"]: s for s in server.scores if s.get("traceId")}
    assert scores["entity_f1"]["value"] == 1.0
    assert "via alias=2" in scores["entity_f1"]["comment"]
    assert scores["relationship_f1"]["value"] == 1.0
    assert "via alias=1" in scores["relationship_f1"]["comment"]
