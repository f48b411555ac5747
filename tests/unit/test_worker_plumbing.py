"""The parent and child plumbing of the worker processes (``workers/``): an item whose run
raises in a worker is still answered (else the run waits for it forever), a worker that
cannot start leaves no open file, and a worker's failure line never carries a secret."""

from __future__ import annotations

import asyncio
import io
import pickle
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

import pytest

from extraction_eval.types import DatasetItem
from extraction_eval.workers.item_pool import ItemPool
from extraction_eval.workers.item_worker import DONE, LOST, READY, _serve
from extraction_eval.workers.report_worker import Worker


class _Raising:
    """A runner whose ``run_scored`` raises (a scorer's bug, not the pipeline's failure)."""

    pipeline = None

    async def run_scored(self, item: DatasetItem) -> Any:
        raise RuntimeError(f"scoring {item.id} broke")


class _Outbox:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def put(self, message: Any) -> None:
        self.sent.append(message)


def test_an_item_whose_run_raises_in_a_worker_is_answered_as_lost() -> None:
    items = [DatasetItem(id="a", text="Ada."), DatasetItem(id="b", text="Bob.")]
    source = io.BytesIO(pickle.dumps(items) + pickle.dumps(None))
    outbox = _Outbox()
    asyncio.run(_serve(_Raising(), None, source, outbox))  # type: ignore[arg-type]
    assert outbox.sent[0] == (READY,)
    lost = {m[1]: m[2] for m in outbox.sent if m[0] == LOST}
    assert set(lost) == {"a", "b"} and not [m for m in outbox.sent if m[0] == DONE]
    assert "RuntimeError: scoring a broke" in lost["a"]


def test_a_worker_that_cannot_start_leaves_no_open_file(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[IO[bytes]] = []
    real = tempfile.TemporaryFile

    def recorded(*args: Any, **kwargs: Any) -> IO[bytes]:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    def no_python(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        raise OSError("no interpreter here")

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    monkeypatch.setattr(subprocess, "Popen", no_python)
    with pytest.raises(OSError, match="no interpreter here"):
        ItemPool(2)
    assert opened and all(f.closed for f in opened)


def test_a_worker_failure_line_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "review1-worker-secret-5b7e2c9d"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    worker = Worker(tmp_path / "absent.db", [], 0)
    try:
        worker.proc.wait(timeout=60)
        worker.errors.write(f"ValueError: the gateway refused key {secret}\n".encode())
        why = worker.why()
    finally:
        worker.stop()
        worker.close()
    assert "gateway refused key" in why and secret not in why


def test_a_worker_gone_before_its_stop_leaves_no_pipe_open() -> None:
    """The child died; the next message met a broken pipe, so the writer never sent the
    stop (nor closed stdin): stopping the pool still closes both pipes."""
    pool = ItemPool(1)
    (worker,) = pool.workers
    worker.proc.kill()
    worker.proc.wait(timeout=60)
    worker.send(DatasetItem(id="a", text="Ada."))
    worker._writer.join(timeout=60)  # it met the broken pipe and returned
    pool.stop()
    assert worker.proc.stdin is not None and worker.proc.stdin.closed
    assert worker.proc.stdout is not None and worker.proc.stdout.closed
