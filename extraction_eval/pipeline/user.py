"""A user's own extraction function as a pipeline: ``--pipeline package.module:function``.

The function is called with keyword arguments only (``text``, ``schema``, ``item``,
``config``); arguments it does not declare are left out unless it takes ``**kwargs``, so
``def extract(*, text): ...`` works and later additions never break existing functions.
Sync functions run in threads of their own (context variables copied, so tracing spans still
nest) and therefore overlap like async ones. ``timeout_s`` bounds each call: an async function
is cancelled; a sync one is given up on (its thread cannot be stopped and may still run).
Whatever the function raises, ``SystemExit`` and ``KeyboardInterrupt`` included, is the
item's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.errors import InvalidValue, SchemaFailure
from extraction_eval.llm.context import item_context
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.prompts.contract import coerce_extraction, read_extraction
from extraction_eval.types import DatasetItem

UserFunction = Callable[..., Any]


def _load_module(module_ref: str, spec: str) -> Any:
    if module_ref.endswith(".py"):  # a script path: path/to/file.py:function
        path = Path(module_ref)
        if not path.is_file():
            raise InvalidValue("pipeline", f"{spec!r}: file {module_ref} not found")
        name = f"_extraction_eval_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise InvalidValue("pipeline", f"{spec!r}: cannot load {module_ref}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise InvalidValue(
                "pipeline", f"{spec!r}: importing {module_ref} failed: {type(exc).__name__}: {exc}"
            ) from None
        return module
    try:
        return importlib.import_module(module_ref)
    except ModuleNotFoundError as exc:
        where = "" if exc.name == module_ref else f" (missing {exc.name!r})"
        raise InvalidValue("pipeline", f"{spec!r}: cannot import {module_ref!r}{where}") from None
    except Exception as exc:
        raise InvalidValue(
            "pipeline", f"{spec!r}: importing {module_ref!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def load_user_function(spec: str) -> UserFunction:
    """``package.module:function`` (or ``path/to/file.py:function``) -> the callable."""
    module_ref, sep, attr = spec.rpartition(":")
    if not sep or not module_ref or not attr:
        raise InvalidValue("pipeline", f"expects package.module:function, got {spec!r}")
    module = _load_module(module_ref, spec)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidValue("pipeline", f"{spec!r}: {module_ref!r} has no {attr!r}") from None
    if not callable(target):
        raise InvalidValue("pipeline", f"{spec!r}: {attr!r} is not callable")
    return target  # type: ignore[no-any-return]


def _accepted(func: UserFunction, offered: dict[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: offer everything
        return offered
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return offered
    names = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    return {k: v for k, v in offered.items() if k in names}


def _is_async(func: UserFunction) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - async callable objects
    )


@dataclass
class UserPipeline:
    """Implements ``Pipeline`` around a user's function; no retries (the function owns those)."""

    func: UserFunction
    config: PipelineConfig = field(default_factory=PipelineConfig)
    ref: str | None = None

    @classmethod
    def from_spec(cls, spec: str, config: PipelineConfig) -> UserPipeline:
        return cls(func=load_user_function(spec), config=config, ref=spec)

    async def extract(self, item: DatasetItem) -> PipelineOutput:
        kwargs = _accepted(
            self.func,
            {"text": item.text, "schema": item.schema_, "item": item, "config": self.config},
        )
        limit = self.config.timeout_s
        with item_context(item.id):
            deadline = asyncio.timeout(limit)
            try:
                async with deadline:
                    result = await self._call(kwargs)
            except TimeoutError:
                if not deadline.expired():
                    raise  # the function's own TimeoutError
                how = "cancelled" if _is_async(self.func) else "its thread may still be running"
                raise TimeoutError(f"pipeline did not return within {limit:g} s ({how})") from None
        if isinstance(result, PipelineOutput):
            return result
        raw = result if isinstance(result, str) else None
        repairs: tuple[str, ...] = ()
        try:
            if raw is not None:  # text, as a model writes it: read like a model's reply
                extraction, repairs = read_extraction(raw, strict=self.config.strict_json)
            else:
                extraction = coerce_extraction(result)
        except SchemaFailure as exc:
            raise SchemaFailure(
                f"pipeline {self.ref or getattr(self.func, '__name__', 'function')} returned "
                f"an invalid extraction: {exc}",
                raw=raw if raw is not None else _preview(result),
                attempts=1,
            ) from None
        return PipelineOutput(
            extraction=extraction, raw=raw, attempts=1, model=self.ref, repairs=repairs
        )

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        """The user's function: awaited when async, else in a daemon thread of its own."""
        if _is_async(self.func):
            result = await self.func(**kwargs)
        else:
            try:
                result = await in_daemon_thread(self.func, kwargs)
            except _Carried as carried:
                raise carried.error from None
        if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
            result = await result
        return result


class _Carried(Exception):
    """A ``GeneratorExit`` from a thread, carried across the future as a plain exception."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def in_daemon_thread(func: UserFunction, kwargs: dict[str, Any]) -> Any:
    """``func(**kwargs)`` in a new daemon thread, as an awaitable (context variables copied,
    as ``asyncio.to_thread`` does, so tracing spans nest).

    Not the loop's executor: a call that hangs past its timeout is given up on but cannot be
    stopped, and an executor's threads are joined when the loop and the interpreter close,
    so one hung call would keep the finished run from exiting. A daemon thread is left behind.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # given up on (timeout, Ctrl-C)
            return
        if error is None:
            future.set_result(value)
        elif isinstance(error, StopIteration):  # a future cannot hold one
            future.set_exception(RuntimeError(f"StopIteration raised: {error!r}"))
        elif isinstance(error, GeneratorExit):  # thrown into the awaiting coroutine, it would
            future.set_exception(_Carried(error))  # close it instead: carried, raised in it
        else:
            future.set_exception(error)

    def target() -> None:
        try:
            value = context.run(func, **kwargs)
        except BaseException as error:  # SystemExit, KeyboardInterrupt: the item's error
            _deliver(loop, settle, None, error)
        else:
            _deliver(loop, settle, value, None)

    threading.Thread(target=target, name="extraction-eval-pipeline", daemon=True).start()
    return future


def _deliver(loop: asyncio.AbstractEventLoop, settle: Any, value: Any, error: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed while the call hung: nobody
        loop.call_soon_threadsafe(settle, value, error)  # waits any more


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 2000 else text[:2000] + "…"
