"""LangFuse mode with a real ``openai`` client over loopback HTTP: the client's connections are
closed on the SDK's event loop (the one ``run_experiment`` creates and closes), so nothing is
left for the garbage collector to complain about ("Unclosed client session" on stderr)."""

from __future__ import annotations

import gc
import logging
import warnings
from collections.abc import Iterator

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.integration.test_langfuse_experiment import DATASET, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse
from tests.support.openai_server import LoopbackServer


@pytest.fixture()
def model_server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_the_model_client_is_closed_on_the_sdks_loop(
    server: FakeLangfuse,
    model_server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    transport: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    items = LocalStore().get_items(DATASET)[:5]
    upload(server, items)
    use_langfuse(server, monkeypatch, f"client-{transport}")
    pipeline = PipelineConfig(
        model="openai:m", base_url=model_server.url, extra={"http_transport": transport}
    )
    config = RunConfig(dataset=DATASET, name=f"c-{transport}", pipeline=pipeline, concurrency=3)
    with caplog.at_level(logging.ERROR), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        outcome = run_experiment(config)
        del outcome
        gc.collect()
    assert len(model_server.chat_requests) == 1 + 5  # the response-format probe, the items
    unclosed = [r.getMessage() for r in caplog.records if "nclosed" in r.getMessage()]
    unclosed += [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
