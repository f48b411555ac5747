"""``--pipeline package.module:function``: loading, calling conventions, threads, validation."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.errors import InvalidValue, SchemaFailure
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.user import UserPipeline, load_user_function
from extraction_eval.types import DatasetItem, Extraction, Schema

ITEM = DatasetItem(id="u1", text="Ada works at Acme.", schema=Schema(entity_types=["person"]))

MODULE = textwrap.dedent(
    """
    import asyncio
    import threading
    import time

    from extraction_eval.llm.context import current_item_id
    from extraction_eval.types import Entity, Extraction

    SEEN = []

    def sync_dict(*, text, schema, item, config, **kwargs):
        SEEN.append({"thread": threading.get_ident(), "item_id": current_item_id.get(),
                     "schema": schema, "item": item, "config": config, "kwargs": kwargs})
        return {"entities": [{"name": text.split()[0], "type": "person"}]}

    def only_text(text):
        return '{"entities": [{"name": "%s", "type": "person"}], "relationships": []}' % text[:3]

    def fenced_text(text):
        return "```json\\n" + only_text(text) + "\\n```"

    async def async_obj(*, text, **kwargs):
        await asyncio.sleep(0)
        return Extraction(entities=[Entity(name="Acme", type="organization")])

    def slow(*, text, **kwargs):
        time.sleep(0.2)
        return {"entities": [], "relationships": []}

    def bad_shape(**kwargs):
        return {"result": "Ada"}

    def bad_type(**kwargs):
        return 42

    def raises(**kwargs):
        raise RuntimeError("user bug")

    def full_output(**kwargs):
        from extraction_eval.pipeline.base import PipelineOutput
        return PipelineOutput(extraction=Extraction(), raw="mine", attempts=2)

    class Namespace:
        @staticmethod
        def nested(**kwargs):
            return Extraction()

    NOT_CALLABLE = 3
    """
)


@pytest.fixture()
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pipes.py").write_text(MODULE)
    (package / "broken.py").write_text("raise ImportError('needs torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "userpkg.pipes"
    for name in [n for n in sys.modules if n.startswith("userpkg")]:
        del sys.modules[name]


def run(
    spec: str, item: DatasetItem = ITEM, config: PipelineConfig | None = None
) -> PipelineOutput:
    pipe = UserPipeline.from_spec(spec, config or PipelineConfig(pipeline=spec))
    return asyncio.run(pipe.extract(item))


def test_sync_function_gets_keyword_args_in_a_worker_thread_with_context(user_module: str) -> None:
    import threading

    config = PipelineConfig(pipeline=f"{user_module}:sync_dict", temperature=0.2)
    out = run(f"{user_module}:sync_dict", config=config)
    assert out.extraction.entities[0].name == "Ada"
    assert out.attempts == 1 and not out.cache_hit
    seen = sys.modules[user_module].SEEN[-1]
    assert seen["thread"] != threading.get_ident()
    assert seen["item_id"] == "u1"  # context variables follow into the thread
    assert seen["schema"] == ITEM.schema_ and seen["item"] is ITEM and seen["config"] is config
    assert seen["kwargs"] == {}


def test_functions_receive_only_the_arguments_they_declare(user_module: str) -> None:
    out = run(f"{user_module}:only_text")
    assert out.extraction.entities[0].name == "Ada"
    assert out.raw is not None and out.raw.startswith('{"entities"')


def test_text_returned_is_read_like_a_model_reply_repairs_recorded(user_module: str) -> None:
    spec = f"{user_module}:fenced_text"
    out = run(spec)
    assert out.repairs == ("fence",) and out.extraction.entities[0].name == "Ada"
    with pytest.raises(SchemaFailure, match=r"returned an invalid extraction: not bare JSON"):
        run(spec, config=PipelineConfig(pipeline=spec, strict_json=True))


def test_async_function_returning_an_extraction(user_module: str) -> None:
    assert run(f"{user_module}:async_obj").extraction.entities[0].name == "Acme"


def test_dotted_attribute_and_pipeline_output_pass_through(user_module: str) -> None:
    assert run(f"{user_module}:Namespace.nested").extraction == Extraction()
    out = run(f"{user_module}:full_output")
    assert (out.raw, out.attempts) == ("mine", 2)


def test_sync_functions_overlap(user_module: str) -> None:
    pipe = UserPipeline.from_spec(f"{user_module}:slow", PipelineConfig())
    items = [ITEM.model_copy(update={"id": str(i)}) for i in range(4)]

    async def all_items() -> list[PipelineOutput]:
        return await asyncio.gather(*(pipe.extract(item) for item in items))

    started = time.monotonic()
    assert len(asyncio.run(all_items())) == 4
    assert time.monotonic() - started < 0.6  # 4 x 0.2 s sequentially would be 0.8 s


@pytest.mark.parametrize(
    ("function", "message"),
    [("bad_shape", "neither 'entities' nor 'relationships'"), ("bad_type", "got int")],
)
def test_invalid_returns_are_schema_failures(user_module: str, function: str, message: str) -> None:
    with pytest.raises(SchemaFailure, match=message) as info:
        run(f"{user_module}:{function}")
    assert info.value.raw is not None and info.value.attempts == 1


def test_user_exceptions_propagate_for_the_runner_to_record(user_module: str) -> None:
    with pytest.raises(RuntimeError, match="user bug"):
        run(f"{user_module}:raises")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon_here", "expects package.module:function"),
        ("userpkg.pipes:", "expects package.module:function"),
        ("userpkg.nope:f", "cannot import 'userpkg.nope'"),
        ("userpkg.pipes:missing", "has no 'missing'"),
        ("userpkg.pipes:NOT_CALLABLE", "is not callable"),
        ("userpkg.broken:f", "ImportError: needs torch"),
    ],
)
def test_load_errors_are_one_line_config_errors(user_module: str, spec: str, message: str) -> None:
    with pytest.raises(InvalidValue, match=message) as info:
        load_user_function(spec)
    assert "\n" not in str(info.value)
    assert info.value.field == "pipeline"  # the CLI shows it as --pipeline


def test_missing_dependency_of_an_existing_module_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needsdep.py").write_text("import not_installed_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidValue, match="missing 'not_installed_dependency_xyz'"):
        load_user_function("needsdep:f")


def test_script_path_specs_load_from_files(tmp_path: Path) -> None:
    script = tmp_path / "my_pipeline.py"
    script.write_text(
        "def extract(*, text, **kw):\n"
        "    return {'entities': [{'name': text[:3], 'type': 'person'}], 'relationships': []}\n"
    )
    out = run(f"{script}:extract")
    assert out.extraction.entities[0].name == "Ada"
    with pytest.raises(InvalidValue, match="not found"):
        load_user_function(f"{tmp_path / 'absent.py'}:extract")
