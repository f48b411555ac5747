"""Response formats: the config's choices match the provider's, which refusals count as
invalid requests (not retried), and the run record's format choice reads back."""

from __future__ import annotations

import httpx
import openai
import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.llm.formats import FormatAttempt, FormatChoice
from extraction_eval.llm.openai_provider import AUTO, RESPONSE_FORMATS, map_openai_error
from extraction_eval.pipeline.base import RESPONSE_FORMAT_CHOICES, PipelineConfig


def test_the_config_offers_what_the_provider_sends() -> None:
    assert (AUTO, *RESPONSE_FORMATS) == RESPONSE_FORMAT_CHOICES
    assert PipelineConfig().response_format == "auto"
    with pytest.raises(InvalidValue, match="response_format must be one of auto, json_schema"):
        PipelineConfig(response_format="xml")


def status_error(status: int, message: str) -> openai.APIStatusError:
    body = {"error": {"message": message}}
    response = httpx.Response(
        status, json=body, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    )
    return openai.APIStatusError(message, response=response, body=body)


@pytest.mark.parametrize(
    ("status", "message", "invalid", "retryable"),
    [
        (400, "Invalid schema for response_format", True, False),
        (422, "Field required", True, False),
        # llama-cpp-python 0.3: pydantic's refusal of json_schema, as a 500
        (500, "Input should be 'text' or 'json_object' [type=literal_error]", True, False),
        (500, "1 validation error for CreateChatCompletionRequest", True, False),
        (500, "CUDA out of memory", False, True),  # a real server failure: retried
        (503, "loading model", False, True),
        (429, "slow down", False, True),
        (404, "model not found", False, False),
    ],
)
def test_which_refusals_are_invalid_requests(
    status: int, message: str, invalid: bool, retryable: bool
) -> None:
    mapped = map_openai_error(status_error(status, message))
    assert (mapped.invalid_request, mapped.retryable) == (invalid, retryable)


def test_the_recorded_choice_reads_back_and_summarises() -> None:
    choice = FormatChoice(
        asked="auto",
        used="json_object_schema",
        how="detected",
        family="llamacpp",
        tried=(
            FormatAttempt("json_schema", "rejected", "OpenAI API error 500: Input should be"),
            FormatAttempt("json_object_schema", "accepted", "the answer followed the schema"),
        ),
    )
    assert FormatChoice.from_json(choice.to_json()) == choice
    assert choice.summary() == (
        "json_object_schema (llamacpp form) (auto: the server refused json_schema)"
    )
    assert choice.warning() is None
    ignored = FormatChoice("auto", "json_schema", "detected", "llamacpp",
                           (FormatAttempt("json_schema", "accepted",
                                          "the answer did not follow the schema"),))  # fmt: skip
    assert "may ignore the format" in (ignored.warning() or "")
    assert FormatChoice.from_json(None) is None
    assert FormatChoice.from_json({"used": "xml"}) is None
