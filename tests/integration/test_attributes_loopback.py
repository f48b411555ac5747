"""Declared attributes through the real ``openai`` / ``google-genai`` clients against the
loopback server: the schema the server receives carries the enums, and an answer that breaks
them is scored as a per-object violation, not an item failure."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.bundled import JOURNAL_DATASET, journal_items
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.prompts.contract import extraction_json_schema
from tests.support.openai_server import LoopbackServer, input_text

ITEMS = {i.text: i for i in journal_items()}


def echo_gold_with_one_bad_value(body: dict[str, Any]) -> str:
    """Answer with the item's gold observations as {key, value} pairs, except that every
    'present' polarity comes back as 'yes' (not a declared value)."""
    item = ITEMS[input_text(body)]
    entities = []
    for e in item.expected.entities:
        attrs = [
            {"key": k, "value": "yes" if (k, v) == ("polarity", "present") else v}
            for k, v in e.attributes.items()
        ]
        entities.append(
            {"name": e.name, "type": e.type, "evidence": e.evidence, "attributes": attrs}
        )
    return json.dumps({"entities": entities, "relationships": []})


def test_openai_receives_the_declared_enums_and_violations_are_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    store = LocalStore()
    items = journal_items()
    store.upload_items(JOURNAL_DATASET, items)
    with LoopbackServer(answer=echo_gold_with_one_bad_value) as server:
        config = RunConfig(
            dataset=JOURNAL_DATASET,
            name="loopback-attrs",
            pipeline=PipelineConfig(
                model="openai:loopback-model", base_url=server.url, response_format="json_schema"
            ),
            scoring=ScoringConfig(match="span", resamples=200),
            backend="local",
        )
        outcome = asyncio.run(arun_local(config, store=store))
        bodies = [r.body for r in server.chat_requests]

    assert len(bodies) == len(items)
    schema = items[0].schema_
    sent = bodies[0]["response_format"]["json_schema"]
    assert sent["strict"] is True and sent["schema"] == extraction_json_schema(schema)
    entity = sent["schema"]["properties"]["entities"]["items"]
    assert entity["properties"]["type"]["enum"] == ["observation"]  # one declared type
    pairs = {
        p["properties"]["key"]["enum"][0]: p["properties"]["value"]["enum"]
        for p in entity["properties"]["attributes"]["items"]["anyOf"]
    }
    assert pairs == {
        "domain": ["symptom", "food", "emotion", "mind"],
        "polarity": ["present", "absent", "uncertain"],
        "intensity": ["low", "moderate", "high", "unspecified"],
        "time": ["morning", "afternoon", "evening", "night", "unspecified"],
    }
    assert "Declared attributes" in bodies[0]["messages"][0]["content"]

    # every item succeeded; objects with a bad polarity are violations and disagree
    assert outcome.summary.errors == 0
    gold = [e for i in items for e in i.expected.entities]
    bad = sum(1 for e in gold if e.attributes["polarity"] == "present")
    report = outcome.summary.report
    assert report["entities"]["f1"] == 1.0
    assert report["attributes"]["violations"]["objects"] == bad
    assert report["attributes"]["violations"]["checked"] == len(gold)
    assert outcome.summary.values["attribute_violation_rate"] == bad / len(gold)
    assert outcome.summary.values["attr.polarity"] == (len(gold) - bad) / len(gold)
    assert outcome.summary.values["attr.domain"] == 1.0


def test_gemini_receives_the_declared_enums(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-dummy")
    item = journal_items()[0]
    with LoopbackServer(answer=echo_gold_with_one_bad_value) as server:
        pipe = make_pipeline(PipelineConfig(model="gemini:gemini-test", base_url=server.root_url))
        assert isinstance(pipe, LLMPipeline)

        async def go() -> None:
            try:
                await pipe.extract(item)
            finally:
                await pipe.aclose()

        asyncio.run(go())
        (request,) = server.requests
    schema = request.body["generationConfig"]["responseSchema"]
    entity = schema["properties"]["entities"]["items"]
    text = json.dumps(entity)
    assert "additionalProperties" not in text
    assert '"enum": ["present", "absent", "uncertain"]' in text
    # the SDK sends the union in protobuf's snake_case spelling ("any_of"), which the API
    # accepts like "anyOf": one closed {key, value} shape per declared key
    variants = entity["properties"]["attributes"]["items"]["any_of"]
    assert [v["properties"]["key"]["enum"] for v in variants] == [
        ["domain"],
        ["intensity"],
        ["polarity"],
        ["time"],
    ]
