"""Reading model replies leniently (``prompts/replies.py``): the three repairs, what is refused,
the awkward replies (a 50 MB reply, ten fenced blocks, nested wrappers, a fence inside a
string), and the same reading on every path of ``LLMPipeline`` (a call, the cache, strict)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from extraction_eval.errors import SchemaFailure
from extraction_eval.llm.base import Completion
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.retry import RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.prompts.contract import read_extraction
from extraction_eval.prompts.replies import read_json_reply
from extraction_eval.prompts.template import load_local_prompt
from extraction_eval.types import DatasetItem

ANSWER = {
    "entities": [{"name": "Ada", "type": "person", "evidence": "Ada works at Acme."}],
    "relationships": [],
}
BARE = json.dumps(ANSWER)


@pytest.mark.parametrize(
    ("reply", "repairs"),
    [
        (BARE, ()),
        (f"  {BARE}\n", ()),
        (f"```json\n{BARE}\n```", ("fence",)),
        (f"```\n{BARE}\n```", ("fence",)),
        (f"Here is the JSON:\n```json\n{BARE}\n```\nAnything else?", ("fence", "prose")),
        (f"Sure! {BARE} Hope this helps {{:-)}}", ("prose",)),
        (f"The {{entities}} are: {BARE}", ("prose",)),
        (json.dumps({"result": ANSWER}), ("wrapper",)),
        (f"```json\n{json.dumps({'extraction': ANSWER})}\n```", ("fence", "wrapper")),
        (f"Result: {json.dumps({'data': ANSWER})}.", ("prose", "wrapper")),
    ],
)
def test_each_repair_is_made_and_named(reply: str, repairs: tuple[str, ...]) -> None:
    extraction, made = read_extraction(reply)
    assert made == repairs
    assert [e.name for e in extraction.entities] == ["Ada"]


def test_a_fence_inside_a_string_is_text_not_a_fence() -> None:
    inner = {"entities": [{"name": "```json {}```", "type": "code"}], "relationships": []}
    extraction, made = read_extraction(json.dumps(inner))
    assert made == () and extraction.entities[0].name == "```json {}```"
    # and around prose, the object is still found whole
    extraction, made = read_extraction(f"Answer: {json.dumps(inner)} (done)")
    assert made == ("prose",) and extraction.entities[0].name == "```json {}```"


def test_ten_fenced_blocks_are_refused_in_one_line_naming_how_many() -> None:
    reply = "\n\n".join(f"Item {i}:\n```json\n{BARE}\n```" for i in range(10))
    with pytest.raises(SchemaFailure) as caught:
        read_extraction(reply)
    message = str(caught.value)
    assert "10 JSON objects, not one" in message and "\n" not in message
    assert caught.value.raw == reply  # nothing lost: the row keeps the reply


def test_nested_wrappers_are_unwrapped_one_level_only() -> None:
    with pytest.raises(SchemaFailure, match=r"wrapper inside a wrapper \('a' then 'b'\)"):
        read_extraction(json.dumps({"a": {"b": ANSWER}}))
    # a single key whose value holds no extraction is not a wrapper: the old message
    with pytest.raises(SchemaFailure, match=r"neither 'entities' nor 'relationships' \(keys: x"):
        read_extraction(json.dumps({"x": {"y": 1}}))


def test_a_nest_of_wrappers_at_any_depth_is_one_line_naming_its_keys() -> None:
    for nest, path in (
        ({"a": {"b": {"c": ANSWER}}}, "'a' then 'b' then 'c'"),
        ({"r": {"s": {"t": {"u": ANSWER}}}}, "'r' then 's' then 't' then 'u'"),
    ):
        reply = f"```json\n{json.dumps(nest)}\n```"
        with pytest.raises(SchemaFailure) as caught:
            read_extraction(reply)
        message = str(caught.value)
        assert message == f"a wrapper inside a wrapper ({path}): only one level is unwrapped"
        assert caught.value.raw == reply  # nothing lost: the row keeps the reply


def test_a_fence_inside_a_string_of_a_fenced_reply_is_kept_as_text() -> None:
    """The strings hold a fence (and a closing-fence line) of their own: one fence around one
    object, the strings' text as it was."""
    name = "```json\n{}\n```"
    inner = {"entities": [{"name": name, "type": "code"}], "relationships": []}
    for body in (json.dumps(inner), json.dumps(inner, indent=2)):
        extraction, made = read_extraction(f"```json\n{body}\n```")
        assert made == ("fence",) and extraction.entities[0].name == name


def test_what_is_not_repaired() -> None:
    for reply, problem in (
        ("", "empty response"),
        ("I cannot help with that.", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ("{'entities': []}", "invalid JSON"),  # Python, not JSON: no quote repair
        ("[" * 100_000, "nested too deeply"),
    ):
        with pytest.raises(SchemaFailure, match=problem):
            read_extraction(reply)


def test_a_50_mb_reply_is_read_or_refused_in_bounded_time() -> None:
    entity = {"name": "x" * 200, "type": "t", "evidence": "e" * 200}
    big = json.dumps({"entities": [entity] * 120_000, "relationships": []})
    assert len(big) > 50_000_000
    started = time.perf_counter()
    reply = read_json_reply(f"Here you go: {big}\nDone.")
    assert reply.repairs == ("prose",) and len(reply.value["entities"]) == 120_000
    del reply
    # garbage of the same size: braces that start nothing, an unclosed string; one line
    # each, and the failure keeps the whole reply for the item's row
    for junk in ("{a" * 25_000_000, '{"' + "{" * 50_000_000):
        with pytest.raises(SchemaFailure, match="invalid JSON") as caught:
            read_extraction(junk)
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 200
        assert caught.value.raw is junk
    assert time.perf_counter() - started < 30  # measured: about 1 s on a shared 2-core box


def test_strict_refuses_what_it_would_have_repaired_naming_it() -> None:
    assert read_extraction(BARE, strict=True)[1] == ()
    with pytest.raises(SchemaFailure) as caught:
        read_extraction(f"```json\n{json.dumps({'result': ANSWER})}\n```", strict=True)
    assert str(caught.value) == (
        "not bare JSON (strict_json): a Markdown code fence, a single-key wrapper object"
    )


# --- the same reading on every path of the model pipeline ---------------------------------

ITEM = DatasetItem(id="i1", text="Ada works at Acme.")
FENCED = f"```json\n{BARE}\n```"


class DictCache:
    def __init__(self) -> None:
        self.data: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        return self.data.get(key)

    def put(self, key: str, completion: Completion) -> None:
        self.data[key] = completion


def _pipeline(cache: DictCache, *, strict: bool) -> tuple[LLMPipeline, FakeProvider]:
    fake = FakeProvider.from_script({"default": {"text": FENCED}}, model="test")
    config = PipelineConfig(model="fake:test", strict_json=strict)
    pipe = LLMPipeline(
        fake, load_local_prompt(), config, cache=cache, retry=RetryPolicy.immediate(1)
    )
    return pipe, fake


def test_a_repaired_reply_is_recorded_cached_raw_and_refused_by_strict_from_the_cache() -> None:
    cache = DictCache()
    lenient, fake = _pipeline(cache, strict=False)
    out = asyncio.run(lenient.extract(ITEM))
    assert out.repairs == ("fence",) and out.raw == FENCED and len(fake.calls) == 1
    assert [c.text for c in cache.data.values()] == [FENCED]  # the raw reply, not the JSON
    # strict, on the same cache: the same raw reply re-read, refused, no model call
    strict, strict_fake = _pipeline(cache, strict=True)
    with pytest.raises(SchemaFailure, match=r"strict_json.*Markdown code fence") as caught:
        asyncio.run(strict.extract(ITEM))
    assert strict_fake.calls == [] and caught.value.raw == FENCED
    # and a lenient run reads the cache as before: repaired, from the cache
    again = asyncio.run(_pipeline(cache, strict=False)[0].extract(ITEM))
    assert again.cache_hit and again.repairs == ("fence",)


def test_strict_refuses_a_fresh_repaired_reply_but_keeps_it_readable_in_the_cache() -> None:
    cache = DictCache()
    strict, fake = _pipeline(cache, strict=True)
    with pytest.raises(SchemaFailure, match="strict_json") as caught:
        asyncio.run(strict.extract(ITEM))
    assert len(fake.calls) == 1 and caught.value.raw == FENCED
    assert caught.value.usage is not None  # the call was paid for: its usage is on the row
    lenient, lenient_fake = _pipeline(cache, strict=False)
    out = asyncio.run(lenient.extract(ITEM))
    assert out.cache_hit and out.repairs == ("fence",) and lenient_fake.calls == []
