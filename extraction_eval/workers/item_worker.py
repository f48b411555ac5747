"""A run's item worker process (``--workers N``): a fresh interpreter that runs the items the
run's process sends it, each through its own pipeline (model client, event loop) and scorer,
and sends back each item's result, score and deferred cache writes. It stores nothing: the
run's process is the one writer (results, cache, budget, progress, lock), as with one process.

The parent side (start, send, receive, stop) is ``workers/item_pool.py``. The wire: pickles
over the child's stdin and a private copy of its stdout (fd 1 itself then points at stderr,
so a stray print of a user's pipeline cannot land among the pickles); stdin carries
``sys.path``, then the :class:`Job`, then lists of :class:`Task` (an item with what the run's
process knows of its cached answer; a bare item: nothing known) (``None``: stop); stdout carries
lists of messages (:data:`READY`, ``(DONE, item_id, result, score, cache_rows)``,
``(LOST, item_id, why)`` when a result cannot be sent or its run raised, ``(FAILED, why)``
when the setup failed). Ctrl-C is the run's process's: this one ignores SIGINT and is
stopped by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import queue
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from extraction_eval.backends.local import LocalStore, SQLiteResponseCache
from extraction_eval.errors import one_line
from extraction_eval.experiments.runner import ItemRunner
from extraction_eval.llm.base import Completion
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.redact import register_secret
from extraction_eval.types import DatasetItem

READY, DONE, LOST, FAILED = "ready", "done", "lost", "failed"


class Task(NamedTuple):
    """An item for a worker, with what the run's cost estimate learned of its response-cache
    entry (``SQLiteResponseCache.recall``): its key and answer (None: not cached). The worker
    primes its cache with it, so the item's lookup reads nothing again (``key`` None:
    nothing known, the worker's cache reads as usual)."""

    item: DatasetItem
    key: str | None = None
    answer: Completion | None = None


@dataclass(frozen=True)
class Job:
    """What a worker needs to run a run's items as the run's own process would: the pipeline's
    config and prompt, the response format the run settled (no probe again), the scorer's
    settings (an ``ItemRunner``'s fields but its pipeline), and the store its cache reads."""

    store_path: str
    pipeline: PipelineConfig
    prompt: PromptTemplate
    format_choice: Any  # llm.formats.FormatChoice | None
    runner_fields: dict[str, Any]
    secrets: list[str] = field(default_factory=list)  # registered in the run's process


def job_for(runner: ItemRunner, store: LocalStore, config: PipelineConfig) -> Job:
    """The job of a prepared run's runner (its pipeline rebuilt in each worker)."""
    from dataclasses import fields

    from extraction_eval.redact import configured_secrets

    pipeline = runner.pipeline
    provider = getattr(pipeline, "provider", None)
    prompt = getattr(pipeline, "prompt", None)
    if not isinstance(prompt, PromptTemplate):
        from extraction_eval.prompts.template import load_local_prompt

        prompt = load_local_prompt()
    return Job(
        store_path=str(store.path),
        pipeline=config,
        prompt=PromptTemplate(  # the LangFuse prompt client stays here
            name=prompt.name,
            messages=prompt.messages,
            version=prompt.version,
            label=prompt.label,
            source=prompt.source,
        ),
        format_choice=getattr(provider, "format_choice", None),
        runner_fields={f.name: getattr(runner, f.name) for f in fields(runner)}
        | {"pipeline": None},
        secrets=configured_secrets({}),  # the registered ones (the environment is inherited)
    )


class _Outbox:
    """Messages to the run's process, pickled and written by a thread of their own (a full
    pipe never blocks the loop), a batch per write."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send, name="worker-outbox", daemon=True)
        self._thread.start()

    def put(self, message: Any) -> None:
        self._queue.put(message)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _send(self) -> None:
        closing = False
        while not closing:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(self._queue.get_nowait())
            if None in batch:
                closing = True
                batch = [m for m in batch if m is not None]
            if not batch:
                continue
            try:
                data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # one message that does not pickle: the others still go
                data = pickle.dumps([_picklable(m) for m in batch], pickle.HIGHEST_PROTOCOL)
            try:
                self._out.write(data)
                self._out.flush()
            except OSError:  # the run's process is gone: nothing to tell anyone
                os._exit(1)


def _picklable(message: Any) -> Any:
    try:
        pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return (LOST, message[1], f"its result could not be sent: {one_line(exc)}")
    return message


def _setup(
    job: Job, tracer: Any = None
) -> tuple[ItemRunner, SQLiteResponseCache | None, LocalStore | None]:
    for secret in job.secrets:
        register_secret(secret)
    store = None
    if job.pipeline.cache != "off" and not job.pipeline.pipeline:
        store = LocalStore(Path(job.store_path), sample=False)
    pipeline = make_pipeline(
        job.pipeline,
        cache=store.cache(defer_writes=True) if store is not None else None,
        prompt=job.prompt,
        tracer=tracer,  # LangFuse mode's workers: a generation per model call
    )
    provider = getattr(pipeline, "provider", None)
    if job.format_choice is not None and provider is not None:
        provider.response_format = job.format_choice.used  # settled by the run: no probe
        provider.format_choice = job.format_choice
    runner = ItemRunner(**(job.runner_fields | {"pipeline": pipeline}))
    cache = getattr(pipeline, "cache", None)
    cache = getattr(cache, "inner", cache)  # --refresh-cache wraps it (write-only)
    # scipy is not preloaded: the first item whose alignment needs the solver imports it (in
    # this worker's loop, holding up only its own items); a run none of whose items needs it
    # no longer pays for the import in every worker while the run's process runs items
    return runner, cache if isinstance(cache, SQLiteResponseCache) else None, store


async def _serve(runner: ItemRunner, cache: SQLiteResponseCache | None, source: IO[bytes],
                 outbox: _Outbox) -> None:  # fmt: skip
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    async def one(sent: Task) -> None:
        item, key = sent.item, sent.key
        if cache is not None and key is not None:
            cache.prime(key, sent.answer)
        try:
            result, scored = await runner.run_scored(item)
            rows = cache.take(item.id) if cache is not None else []
        except Exception as exc:  # unanswered, the run would wait for it forever
            outbox.put((LOST, item.id, f"it failed in its worker: {one_line(exc, with_type=True)}"))
            return
        finally:
            if cache is not None and key is not None:  # not left behind, should the item's
                cache.recall(key)  # lookup not have taken it
        outbox.put((DONE, item.id, result, scored, rows))

    def start(items: list[Task | DatasetItem] | None) -> None:
        if items is None:
            if not stop.done():
                stop.set_result(None)
            return
        for sent in items:
            task = loop.create_task(one(sent if isinstance(sent, Task) else Task(sent)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def read() -> None:
        while True:
            try:
                items = pickle.load(source)
            except Exception:  # EOF: the run's process is gone (or done)
                items = None
            with contextlib.suppress(RuntimeError):  # the loop closed: nothing to do
                loop.call_soon_threadsafe(start, items)
            if items is None:
                return

    threading.Thread(target=read, name="worker-inbox", daemon=True).start()
    outbox.put((READY,))
    try:
        await stop
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        aclose = getattr(runner.pipeline, "aclose", None)  # its clients, on their loop
        if aclose is not None:
            await aclose()


def open_wire() -> tuple[IO[bytes], _Outbox]:
    """A worker's pipes to the run's process: stdin to read, a private copy of stdout to
    write (fd 1 then points at stderr, so a stray print of a user's pipeline cannot land
    among the pickles). Ctrl-C is the run's: it stops the worker, which ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, _Outbox(out)


def work() -> None:
    """The worker's entry (after ``sys.path`` was read): the job, then items until told to
    stop or the run's process is gone."""
    source, outbox = open_wire()
    try:
        job = pickle.load(source)
        runner, cache, store = _setup(job)
    except BaseException as exc:
        outbox.put((FAILED, one_line(exc, with_type=True)))
        outbox.close()
        raise SystemExit(1) from None
    import gc

    gc.freeze()  # the imports' objects are never garbage (see experiments.driver.gc_frozen)
    try:
        asyncio.run(_serve(runner, cache, source, outbox))
    finally:
        outbox.close()
        if store is not None:
            store.close()


# for LangFuse mode's workers (``workers/langfuse_worker.py``): the same setup and wire
set_up = _setup
Outbox = _Outbox
