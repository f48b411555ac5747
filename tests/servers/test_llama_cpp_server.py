"""The wire against llama.cpp's real server (llama-cpp-python) and SmolLM2-135M-Instruct.

A 135M model's extractions are poor; what is checked here is the wire: which response formats
the server takes and how it refuses the others, that auto-detection lands on the one that
constrains decoding to our schema (so answers parse), that declared attributes' ``anyOf``
variants reach the grammar, that token usage is recorded, and that a server-side error is one
row of its own. Run with scripts/test-servers.sh.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.bundled import JOURNAL_DATASET, journal_items
from extraction_eval.errors import ProviderError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.experiments.runner import RunOutcome
from extraction_eval.llm.base import ChatMessage, CompletionRequest
from extraction_eval.llm.openai_provider import OpenAIProvider
from extraction_eval.types import DatasetItem
from tests.servers.conftest import N_CTX

# A 135M model on a CPU: 10-40 s a call on 2 shared cores (the first run here, on a machine
# busy with other builds, needed more than 15 min for 2 probes + 4 items); kept small.
pytestmark = pytest.mark.timeout(1800)
ITEMS = 2


def run(url: str, name: str, *, dataset: str = "extraction-eval", limit: int = ITEMS,
        **pipeline: Any) -> RunOutcome:  # fmt: skip
    from extraction_eval.pipeline.base import PipelineConfig

    config = RunConfig(
        dataset=dataset,
        name=name,
        pipeline=PipelineConfig(model="openai:smollm2", base_url=url, timeout_s=300, **pipeline),
        scoring=ScoringConfig(resamples=50),
        limit=limit,
        concurrency=1,  # the server answers one request at a time anyway
        backend="local",
    )
    return asyncio.run(arun_local(config, store=LocalStore()))


def test_strict_json_schema_is_refused_as_invalid_and_not_retried(llama_server: str) -> None:
    """llama-cpp-python 0.3 has no json_schema response format: HTTP 500 with pydantic's
    message. It is a refused request (not retryable), so a pinned json_schema run fails each
    item once instead of burning the retry policy's backoff on every item."""
    provider = OpenAIProvider(model="smollm2", base_url=llama_server, response_format="json_schema")
    request = CompletionRequest(
        messages=(ChatMessage("user", "Say hi."),),
        model="smollm2",
        json_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        max_tokens=8,
    )

    async def call() -> None:
        try:
            await provider.complete(request)
        finally:
            await provider.aclose()

    with pytest.raises(ProviderError) as caught:
        asyncio.run(call())
    assert caught.value.invalid_request and not caught.value.retryable
    assert "Input should be 'text' or 'json_object'" in str(caught.value)

    outcome = run(llama_server, "pinned-json-schema", response_format="json_schema", limit=2)
    results = outcome.results
    assert [r.attempts for r in results] == [1, 1]
    assert all(r.error_kind == "provider" and "500" in (r.error or "") for r in results)


def test_auto_detects_json_object_with_schema_and_answers_parse(llama_server: str) -> None:
    outcome = run(llama_server, "auto")
    config = outcome.run.config
    assert config["response_format"] == "json_object_schema"
    tried = [(t["format"], t["outcome"]) for t in config["response_format_choice"]["tried"]]
    assert tried == [("json_schema", "rejected"), ("json_object_schema", "accepted")]
    # the probe's answer parsed, or a 135M model went on until the probe's max_tokens
    probe = config["response_format_choice"]["tried"][1]
    assert probe["detail"] in ("the answer followed the schema", "the answer was cut at 64 tokens")
    s = outcome.summary
    assert s.items == ITEMS
    assert s.schema_failures <= ITEMS // 2, [r.error for r in outcome.results]  # grammar-bound
    # token usage as the server reported it, per item and summed
    for r in outcome.results:
        assert r.usage.tokens_in and r.usage.tokens_in > 50 and r.usage.tokens_out
    assert s.tokens_in == sum(r.usage.tokens_in or 0 for r in outcome.results)


def test_plain_json_mode_is_not_held_to_the_schema(llama_server: str) -> None:
    """json_object without the schema: the server takes it (usage reported), but nothing binds
    the answer to our contract; whatever it is, each item is a row."""
    outcome = run(llama_server, "json-mode", response_format="json_object", limit=2)
    assert outcome.summary.items == 2
    assert all(r.usage.tokens_out for r in outcome.results)


def test_declared_attributes_reach_the_grammar_as_anyof_variants(llama_server: str) -> None:
    """The journal example declares attributes (domain, polarity, intensity, time): the schema
    sends one {key, value} shape per key as anyOf, and the grammar llama.cpp builds from it
    admits only declared pairs. So every attribute in every parsed answer is a declared one."""
    store = LocalStore()
    items = journal_items()[:2]
    store.upload_items(JOURNAL_DATASET, items)
    declared = items[0].schema_
    assert declared is not None
    allowed = {(k, v) for k, values in declared.attributes["observation"].items() for v in values}
    outcome = run(llama_server, "journal", dataset=JOURNAL_DATASET, limit=2)
    assert outcome.run.config["response_format"] == "json_object_schema"
    parsed = [json.loads(r.raw_output) for r in outcome.results if r.ok and r.raw_output]
    assert parsed, [r.error for r in outcome.results]
    pairs = [
        (a["key"], a["value"])
        for answer in parsed
        for entity in answer["entities"]
        for a in entity["attributes"]
    ]
    assert set(pairs) <= allowed
    assert all(e["type"] == "observation" for a in parsed for e in a["entities"])


def test_a_server_side_error_is_one_row(llama_server: str) -> None:
    """A document longer than the served context window: the server refuses that request;
    the item is a row with the server's message, the other items run."""
    store = LocalStore()
    base = store.get_items("extraction-eval")[:2]
    too_long = DatasetItem(id="too-long", text="Ada Lovelace met Charles Babbage. " * N_CTX)
    store.upload_items("servers-overflow", [base[0], too_long, base[1]])
    outcome = run(llama_server, "overflow", dataset="servers-overflow", limit=3,
                  response_format="json_object_schema")  # fmt: skip
    by_id = {r.item_id: r for r in outcome.results}
    failed = by_id["too-long"]
    assert failed.error_kind == "provider" and failed.attempts == 1
    assert "maximum context length" in (failed.error or "")  # the server's own 400
    assert by_id[base[0].id].error is None or by_id[base[0].id].error_kind == "schema"
    assert outcome.summary.items == 3
