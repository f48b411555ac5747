"""``wire_json``: the JSON text the LangFuse SDK would put on a span, made without its walk."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langfuse._client.attributes import _serialize

from extraction_eval.backends.langfuse import wire_json

PLAIN: list[Any] = [
    {"entities": [{"name": "Ada Lovelace", "type": "person", "confidence": 0.9}]},
    [{"role": "system", "content": 'Extract.\n\t"quoted" é ✓ 😀'}, {"role": "user", "content": ""}],
    {"input": 12, "output": 5, "total": 17},
    {"temperature": 0.0, "top_p": 1e-7, "seed": 9_007_199_254_740_991 // 10},
    {"flags": [True, False, None], "nested": {"a": {"b": {"c": [1, 2.5, -3]}}}},
    {"a": (1, 2)},
    [],
    {},
    0.1 + 0.2,
]


@pytest.mark.parametrize("value", PLAIN)
def test_plain_json_becomes_the_sdks_own_text(value: Any) -> None:
    text = wire_json(value)
    assert isinstance(text, str)
    assert text == _serialize(value)  # byte for byte what the SDK would have sent


NOT_PLAIN: list[Any] = [
    None,
    "a string goes as it is",
    {"cost": math.nan},
    [math.inf],
    {"id": 2**60},  # past JavaScript's safe integers: the SDK writes it as a string
    {"when": object()},
    {"digits": "1234567890123456789"},  # looks like one: the SDK's path, at no harm
]


@pytest.mark.parametrize("value", NOT_PLAIN)
def test_what_is_not_plain_json_is_left_to_the_sdk(value: Any) -> None:
    assert wire_json(value) is value
