"""A run's scores straight to ``POST /api/public/scores`` in batches, the SDK's own score
queue as the fallback.

Why: the SDK's ``create_score`` queues each score for its background thread, which then
serializes it three times (its JSON round trip, a size check, and the generated client's
``convert_and_respect_annotation_metadata``, which re-resolves the request model's type
hints for every score): about 0.25 ms of CPU per score on the GIL the run's event loop
needs, some 3 ms per item at a dozen scores an item. Here a score is a dict (the very body
the SDK would send: same fields, ids, timestamp format, environment) appended to a list,
and a thread of ours posts each batch as one JSON array with one ``json.dumps``.

What a user sees in LangFuse does not change, and nothing is lost: a batch answered 207 has
its rejected scores counted and reported like the SDK's (``on_unconfirmed``); a batch that
fails (no answer, a timeout, any other status) goes, score by score with the same ids, into
the SDK's own queue, which retries as it always does (an upsert by id: a batch the server
stored before timing out is not doubled). After a 4xx answer every later score takes the
SDK's path too: that server does not take our batches. A client without a known REST
target, with tracing off or sampling on gets the SDK's path from the start.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import httpx

from extraction_eval.backends.langfuse.scores import item_score_id, post_score
from extraction_eval.errors import one_line
from extraction_eval.types import Score

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = ["RestTarget", "ScoreBatches", "register_target", "score_timestamp"]

log = logging.getLogger(__name__)

# POST /api/public/scores has Next.js's default body limit (the SDK caps its batches so too)
MAX_BODY_BYTES = 1_000_000
# a 207 answer is outside input: a larger one is not parsed, and a few of its errors suffice
MAX_ANSWER_BYTES = MAX_BODY_BYTES  # an answer about a body within the limit is smaller
MAX_ANSWER_ERRORS = 5
SDK_DEFAULT_FLUSH_AT = 15
SDK_DEFAULT_FLUSH_INTERVAL_S = 1.0
SDK_DEFAULT_TIMEOUT_S = 5

Unconfirmed = Callable[[int, str | None], None]


@dataclass(frozen=True)
class RestTarget:
    """Where and how a client posts: what ``connect`` gave the SDK, resolved as it does."""

    base_url: str
    public_key: str
    secret_key: str
    batch_size: int
    interval_s: float
    timeout_s: float

    def headers(self) -> dict[str, str]:
        import langfuse

        token = base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        return {
            "Authorization": f"Basic {token}",
            "Content-Type": "application/json",
            "X-Langfuse-Sdk-Name": "python",
            "X-Langfuse-Sdk-Version": str(getattr(langfuse, "__version__", "")),
            "X-Langfuse-Public-Key": self.public_key,
        }


_targets: WeakKeyDictionary[Any, RestTarget] = WeakKeyDictionary()


def register_target(
    lf: Langfuse,
    *,
    base_url: str,
    public_key: str,
    secret_key: str,
    flush_at: int | None,
    flush_interval: float | None,
    timeout_s: int | None,
) -> None:
    """Remember what ``connect`` gave the SDK (arguments first, then LANGFUSE_* as it reads
    them), so a run's scores can go to the same server with the same batch settings."""
    env = os.environ
    # at least one: a batch size of 0 would make the sender spin and lose what it holds
    batch = max(1, flush_at or int(env.get("LANGFUSE_FLUSH_AT") or SDK_DEFAULT_FLUSH_AT))
    interval = flush_interval or float(
        env.get("LANGFUSE_FLUSH_INTERVAL") or SDK_DEFAULT_FLUSH_INTERVAL_S
    )
    timeout = timeout_s or int(env.get("LANGFUSE_TIMEOUT") or SDK_DEFAULT_TIMEOUT_S)
    _targets[lf] = RestTarget(base_url, public_key, secret_key, batch, interval, timeout)


def _direct_target(lf: Langfuse) -> RestTarget | None:
    """The client's target when scores may skip the SDK: it sends them at all (tracing on)
    and sends every one (no sampling, which drops the scores of sampled-out traces)."""
    env = os.environ
    if env.get("LANGFUSE_TRACING_ENABLED", "true").lower() == "false":
        return None
    rate = env.get("LANGFUSE_SAMPLE_RATE")
    if rate is not None and float(rate) != 1.0:
        return None
    return _targets.get(lf)


def score_timestamp() -> str:
    """Now, as the SDK's serializer writes a UTC time (the scores of one item share one:
    ``ScoreBatches.add``'s ``timestamp``)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _rejections(response: httpx.Response, sent: int) -> tuple[int, list[str]]:
    """How many of ``sent`` scores a 207 answer refused (within 0..sent), and its first few
    error messages. The body is outside input: one too large or not of the documented shape
    ``{accepted, rejected, errors}`` counts as all refused, with no messages."""
    try:
        if len(response.content) > MAX_ANSWER_BYTES:
            raise ValueError("answer too large")
        answer = response.json()
        rejected = min(max(int(answer.get("rejected", 0)), 0), sent)
        listed = answer.get("errors") or []
        errors = [str(e.get("message", e))[:200] for e in listed[:MAX_ANSWER_ERRORS]]
    except (ValueError, TypeError, AttributeError, OverflowError):
        return sent, []
    return rejected, errors


class ScoreBatches:
    """Scores to LangFuse in batches of the target's size (``LANGFUSE_FLUSH_AT`` or the run's
    default; never a body over 1 MB), at least every flush interval; see the module
    docstring. ``add`` is cheap and never blocks on the network; ``flush`` waits until
    everything added was posted or handed to the SDK."""

    def __init__(self, lf: Langfuse, *, on_unconfirmed: Unconfirmed | None = None) -> None:
        self._lf = lf
        self._target = _direct_target(lf)
        self._environment = os.environ.get("LANGFUSE_TRACING_ENVIRONMENT") or None
        self._on_unconfirmed = on_unconfirmed
        self._cond = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._in_flight = 0
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._client: httpx.Client | None = None
        self.batches = 0  # requests answered 2xx
        self.rejected = 0  # scores a 207 answer refused
        self.handed_to_sdk = 0  # scores that took the SDK's path after a failed batch

    @property
    def direct(self) -> bool:
        """True while scores go straight to the server (False: the SDK's path)."""
        return self._target is not None

    def add_item(
        self,
        scores: Iterable[Score],
        *,
        trace_id: str | None,
        observation_id: str | None,
        config_ids: Mapping[str, str],
    ) -> None:
        """An item's scores on its trace and task observation, with their deterministic ids
        (a re-post replaces) and one timestamp (made at one moment); the one way a run's
        process or a LangFuse-mode worker posts them."""
        stamp = score_timestamp()
        for score in scores:
            self.add(
                score,
                trace_id=trace_id,
                observation_id=observation_id,
                score_id=item_score_id(trace_id, score) if trace_id else None,
                config_id=config_ids.get(score.name),
                timestamp=stamp,
            )

    def add(
        self,
        score: Score,
        *,
        score_id: str | None = None,
        timestamp: str | None = None,
        **subject: str | None,
    ) -> None:
        """Queue ``score`` on ``subject`` (``trace_id`` / ``observation_id`` /
        ``dataset_run_id``, ``config_id``), with ``score_id`` (a random one if None) and
        ``timestamp`` (``score_timestamp()``: now if None)."""
        if self._target is None or self._closed:
            post_score(self._lf, score, score_id=score_id, **subject)
            return
        value: Any = score.value
        if isinstance(value, bool | int):
            value = float(value)  # as the SDK sends them (True -> 1.0)
        body = {
            "id": score_id or secrets.token_hex(8),
            "traceId": subject.get("trace_id"),
            "observationId": subject.get("observation_id"),
            "datasetRunId": subject.get("dataset_run_id"),
            "name": score.name,
            "value": value,
            "comment": score.comment,
            "environment": self._environment,
            "dataType": score.data_type,
            "configId": subject.get("config_id"),
            "timestamp": timestamp or score_timestamp(),
        }
        body = {k: v for k, v in body.items() if v is not None}
        with self._cond:
            target = self._target
            late = target is None or self._closed  # closed meanwhile: the thread may be gone
            if target is not None and not late:
                self._pending.append(body)
                if self._thread is None:
                    self._start()
                if len(self._pending) >= target.batch_size:
                    self._cond.notify_all()
        if late:
            self._to_sdk([body])

    def flush(self) -> None:
        """Block until every score added so far was posted, or handed to the SDK's queue
        (the caller's ``lf.flush()`` then delivers those)."""
        with self._cond:
            if self._thread is None:
                return
            self._flushing += 1
            self._cond.notify_all()
            try:
                thread = self._thread
                self._cond.wait_for(
                    lambda: (not self._pending and not self._in_flight) or not thread.is_alive()
                )
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Flush, then stop the thread and its connections."""
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    # the sending thread ----------------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name="extraction-eval-scores", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        target = self._target
        assert target is not None
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(
                        lambda: (
                            self._closed
                            or (self._flushing > 0 and bool(self._pending))
                            or len(self._pending) >= target.batch_size
                        ),
                        timeout=target.interval_s,
                    )
                    if self._closed and not self._pending:
                        return
                    # Full batches only while scores keep coming (the thread may wake to 14
                    # pending with a batch of 10: 4 wait for the next 6); everything on a
                    # flush, at close, or when the interval passed with less than a batch.
                    full = len(self._pending) // target.batch_size * target.batch_size
                    if self._closed or self._flushing > 0 or full == 0:
                        full = len(self._pending)
                    batch, self._pending = self._pending[:full], self._pending[full:]
                    self._in_flight = len(batch)
                try:
                    for start in range(0, len(batch), target.batch_size):
                        chunk = batch[start : start + target.batch_size]
                        try:
                            self._send(chunk)
                        except Exception as exc:  # never lose a batch to a bug of ours
                            log.warning("score batch failed (%s): to the SDK's queue", exc)
                            self._to_sdk(chunk)
                finally:
                    with self._cond:
                        self._in_flight = 0
                        self._cond.notify_all()
        finally:
            if self._client is not None:
                self._client.close()

    def _send(self, batch: list[dict[str, Any]]) -> None:
        """One batch as one request (halved until its body is within the limit)."""
        if not batch:
            return
        if self._target is None:  # a 4xx earlier: the SDK's path from now on
            self._to_sdk(batch)
            return
        body = json.dumps(batch, separators=(",", ":")).encode()
        if len(body) > MAX_BODY_BYTES and len(batch) > 1:
            half = len(batch) // 2
            self._send(batch[:half])
            self._send(batch[half:])
            return
        if len(body) > MAX_BODY_BYTES:  # one score over the limit (a huge comment): its 413
            self._to_sdk(batch)  # would send every later score the SDK's way
            return
        try:
            response = self._http().post("/api/public/scores", content=body)
        except httpx.HTTPError as exc:
            log.info("score batch of %d not confirmed (%s): to the SDK's queue", len(batch), exc)
            self._to_sdk(batch)
            return
        if response.status_code == 207:
            self._partial(batch, response)
        elif response.is_success:
            self.batches += 1
        else:
            if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                log.info(
                    "score batches answered HTTP %d: the rest of the run's scores take the"
                    " SDK's queue",
                    response.status_code,
                )
                self._target = None
            self._to_sdk(batch)

    def _partial(self, batch: list[dict[str, Any]], response: httpx.Response) -> None:
        """A 207: the accepted scores are in, the rejected ones are counted and reported (as
        the SDK does, not retried: the server found them invalid)."""
        self.batches += 1
        rejected, errors = _rejections(response, len(batch))
        self.rejected += rejected
        error = one_line("; ".join(errors))[:200] if errors else None
        log.info("LangFuse rejected %d of a batch of %d scores: %s", rejected, len(batch), error)
        if rejected:
            self._unconfirmed(rejected, error)

    def _to_sdk(self, batch: list[dict[str, Any]]) -> None:
        """The SDK's own path for ``batch``: same ids, so nothing is doubled. A score the SDK
        refuses is reported as unconfirmed and the rest still go: raising here would make the
        caller hand the whole batch over again (the ones before it twice) and stop the thread
        that sends every later score."""
        create: Any = self._lf.create_score  # overloaded per data type
        for body in batch:
            try:
                create(
                    name=body["name"],
                    value=body["value"],
                    score_id=body["id"],
                    trace_id=body.get("traceId"),
                    observation_id=body.get("observationId"),
                    dataset_run_id=body.get("datasetRunId"),
                    data_type=body.get("dataType"),
                    comment=body.get("comment"),
                    config_id=body.get("configId"),
                    timestamp=datetime.fromisoformat(body["timestamp"]),
                )
            except Exception as exc:
                error = f"score {body['name']!r}: {one_line(exc, with_type=True)}"
                log.warning("LangFuse client refused %s", error)
                self._unconfirmed(1, error)
                continue
            self.handed_to_sdk += 1

    def _unconfirmed(self, count: int, error: str | None) -> None:
        """Tell the caller; its callback failing must not make the sender resend the batch
        (its accepted scores twice) or stop the thread."""
        if self._on_unconfirmed is None:
            return
        try:
            self._on_unconfirmed(count, error)
        except Exception as exc:
            log.warning("reporting %d unconfirmed scores failed: %s", count, one_line(exc))

    def _http(self) -> httpx.Client:
        if self._client is None:
            target = self._target
            assert target is not None
            self._client = httpx.Client(
                base_url=target.base_url, headers=target.headers(), timeout=target.timeout_s
            )
        return self._client
