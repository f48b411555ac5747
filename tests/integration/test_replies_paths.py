"""The lenient reading of replies on the provider paths other than OpenAI chat: the real
``google-genai`` client and the OpenAI Batch API, each against a loopback server. Assertions
are on what each item recorded (its repairs, its schema failure under ``strict_json``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.errors import SchemaFailure
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.llm.retry import RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.types import DatasetItem
from tests.support.openai_batch_server import BatchServer
from tests.support.openai_server import LoopbackServer, baseline_answer, input_text

ITEM = DatasetItem(id="i1", text="Maria Gonzalez works for Acme Corp. She lives in Madrid.")
NO_WAIT = RetryPolicy(max_attempts=2, timeout_s=5.0, initial_wait_s=0, jitter_s=0)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-dummy")
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_POLL_S", "0.01")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _gemini_extract(server: LoopbackServer, *, strict: bool) -> Any:
    cfg = PipelineConfig(model="gemini:gemini-test", base_url=server.root_url, strict_json=strict)
    pipe = make_pipeline(cfg, retry=NO_WAIT)
    assert isinstance(pipe, LLMPipeline)

    async def run() -> Any:
        try:
            return await pipe.extract(ITEM)
        finally:
            await pipe.aclose()

    return asyncio.run(run())


def test_gemini_replies_are_repaired_and_strict_refuses_them() -> None:
    fenced = lambda body: f"Here you are:\n```json\n{baseline_answer(body)}\n```"  # noqa: E731
    with LoopbackServer(answer=fenced) as server:
        out = _gemini_extract(server, strict=False)
        assert out.repairs == ("fence", "prose")
        assert {e.name for e in out.extraction.entities} >= {"Maria Gonzalez"}
        with pytest.raises(SchemaFailure, match="not bare JSON") as caught:
            _gemini_extract(server, strict=True)
        assert caught.value.raw is not None and caught.value.raw.startswith("Here you are:")


def test_batch_api_answers_are_read_the_same_way() -> None:
    items = LocalStore().get_items(SAMPLE_DATASET)[:3]
    wrapped = {items[1].text, items[2].text}

    def answer(body: dict[str, Any]) -> str:
        bare = baseline_answer(body)
        return json.dumps({"output": json.loads(bare)}) if input_text(body) in wrapped else bare

    with BatchServer(answer=answer) as server:
        outcome = run_experiment(
            RunConfig(
                dataset=SAMPLE_DATASET,
                name="batched",
                pipeline=PipelineConfig(model="openai:gpt-4o-mini", base_url=server.url),
                batch=True,
                backend="local",
                limit=3,
            )
        )
    results = {r.item_id: r for r in outcome.results}
    assert [results[i.id].repairs for i in items] == [[], ["wrapper"], ["wrapper"]]
    assert all(r.ok for r in results.values())
    assert outcome.summary.repairs == {"wrapper": 2}
