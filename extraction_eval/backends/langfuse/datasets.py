"""LangFuse adapters: thin layers over the ``langfuse`` SDK 5 (never re-implementing what it does).

- ``connect`` / ``check_auth`` / ``langfuse_configured``: a client, and a fail-fast key check
  that turns bad keys or an unreachable server into one-line ``BackendError``\\ s.
- ``LangfuseDatasetBackend``: the ``DatasetBackend`` protocol on LangFuse datasets.
- ``fetch_prompt`` / ``push_prompt``: the extraction prompt via LangFuse prompt management,
  falling back to the local template visibly.
- ``LangfuseTracer``: the ``CallTracer`` seam as a LangFuse ``generation`` observation.
- ``read_back``: after a run, poll LangFuse until every trace and score arrived (bounded).

Item ids. LangFuse item ids are unique across the whole project and at most 255 characters,
so an item is stored under ``langfuse_item_id(dataset, item.id)`` (``"{dataset}:{id}"``, hashed
when too long); its own id and upload position are kept in ``metadata["extraction_eval"]``
and restored on the way back, so a round trip gives the same items in the same order.

Secrets never appear in messages: errors name the server URL and the status, not the keys.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import httpx

from extraction_eval.backends.base import (
    DatasetInfo,
    UploadReport,
    item_content_hash,
    item_expected_output,
    item_from_payload,
    item_input,
)
from extraction_eval.errors import (
    BackendError,
    ConfigError,
    ExtractionEvalError,
    NotFoundError,
    UsageError,
)
from extraction_eval.pipeline.tracing import GenerationHandle
from extraction_eval.prompts.template import (
    PROMPT_NAME,
    PromptTemplate,
    load_local_prompt,
    messages_hash,
)
from extraction_eval.types import DatasetItem

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = [
    "ENV_BASE_URL",
    "ENV_HOST",
    "ENV_PUBLIC_KEY",
    "ENV_SECRET_KEY",
    "META_KEY",
    "LangfuseDatasetBackend",
    "LangfuseTracer",
    "VerifyReport",
    "check_auth",
    "close_client",
    "connect",
    "fetch_prompt",
    "langfuse_configured",
    "langfuse_item_id",
    "push_prompt",
    "read_back",
    "to_dataset_item",
]

log = logging.getLogger(__name__)

ENV_PUBLIC_KEY = "LANGFUSE_PUBLIC_KEY"
ENV_SECRET_KEY = "LANGFUSE_SECRET_KEY"
ENV_BASE_URL = "LANGFUSE_BASE_URL"
ENV_HOST = "LANGFUSE_HOST"  # deprecated by the SDK, still honoured
DEFAULT_BASE_URL = "https://cloud.langfuse.com"

META_KEY = "extraction_eval"  # item metadata we own: {"item_id": ..., "position": ...}
MAX_ITEM_ID_LEN = 255
ITEMS_PAGE_SIZE = 100


# --- connection -----------------------------------------------------------------------------


def langfuse_configured(env: Mapping[str, str] | None = None) -> bool:
    """True when keys and a server are set: LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and
    LANGFUSE_BASE_URL (or the deprecated LANGFUSE_HOST)."""
    env = os.environ if env is None else env
    return bool(
        env.get(ENV_PUBLIC_KEY, "").strip()
        and env.get(ENV_SECRET_KEY, "").strip()
        and (env.get(ENV_BASE_URL, "").strip() or env.get(ENV_HOST, "").strip())
    )


def resolve_base_url(base_url: str | None = None) -> str:
    """The server the SDK will talk to: the argument, LANGFUSE_BASE_URL, LANGFUSE_HOST, cloud."""
    url = (
        base_url
        or os.environ.get(ENV_BASE_URL, "").strip()
        or os.environ.get(ENV_HOST, "").strip()
        or DEFAULT_BASE_URL
    )
    return url.rstrip("/")


def connect(
    *,
    public_key: str | None = None,
    secret_key: str | None = None,
    base_url: str | None = None,
    check: bool = True,
    flush_at: int | None = None,
    flush_interval: float | None = None,
    timeout_s: int | None = None,
) -> Langfuse:
    """A LangFuse client from the arguments or the environment, key-checked unless
    ``check=False``.

    Missing keys are a ``ConfigError``; wrong keys or an unreachable server a ``BackendError``
    (see ``check_auth``). Note the SDK keeps one client per public key per process: a second
    ``connect`` with the same key reuses the first one's server and flush settings.
    """
    public_key = public_key or os.environ.get(ENV_PUBLIC_KEY, "").strip() or None
    secret_key = secret_key or os.environ.get(ENV_SECRET_KEY, "").strip() or None
    missing = [
        name
        for name, value in ((ENV_PUBLIC_KEY, public_key), (ENV_SECRET_KEY, secret_key))
        if not value
    ]
    if missing:
        raise ConfigError(f"LangFuse keys missing: set {' and '.join(missing)}")
    url = resolve_base_url(base_url)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"LangFuse base URL must start with http:// or https://, got {url!r}")

    from langfuse import Langfuse  # deferred: keeps `--help` and local mode fast

    lf = Langfuse(
        public_key=public_key,
        secret_key=secret_key,
        base_url=url,
        flush_at=flush_at,
        flush_interval=flush_interval,
        timeout=timeout_s,
    )
    if check:
        check_auth(lf)  # on failure the client is left as is: see close_client
    return lf


def close_client(lf: Langfuse) -> None:
    """Deliver everything queued (spans, scores) and return; use in ``finally``.

    Deliberately ``flush()``, not ``shutdown()``: the SDK keeps one client per public key for
    the whole process, and after ``shutdown()`` every later client with that key silently
    drops its scores ("Score dropped: Langfuse client has been shut down"). The SDK's own
    atexit hook shuts down at interpreter exit.
    """
    lf.flush()


def base_url_of(lf: Langfuse) -> str:
    return str(getattr(lf, "_base_url", None) or "LangFuse").rstrip("/")


def check_auth(lf: Langfuse) -> None:
    """Fail fast before spending anything: ``BackendError`` (one line, no secret) when the
    keys are refused or the server cannot be reached; ``ConfigError`` without keys."""
    with api_errors(lf, "checking the API keys"):
        ok = lf.auth_check()
    if not ok:
        raise ConfigError(f"LangFuse keys missing: set {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}")


# --- error translation ----------------------------------------------------------------------

# While set, the SDK's own generic error line for a failed REST call (logged by
# ``handle_fern_exception`` right before it re-raises) is dropped: we raise a better one.
_translating: contextvars.ContextVar[bool] = contextvars.ContextVar("_translating", default=False)


class _DropTranslatedSdkErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_translating.get() and record.funcName == "handle_fern_exception")


_sdk_filter = _DropTranslatedSdkErrors()


def _install_sdk_filter() -> None:
    logger = logging.getLogger("langfuse")
    if _sdk_filter not in logger.filters:
        logger.addFilter(_sdk_filter)


def _one_line(text: object, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _api_message(body: Any) -> str:
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            if body.get(key):
                return _one_line(body[key])
        return _one_line(json.dumps(body))
    return _one_line(body) if body else ""


@contextmanager
def api_errors(lf: Langfuse, what: str, *, not_found: str | None = None) -> Iterator[None]:
    """Translate SDK / HTTP failures raised inside the block into one-line domain errors.

    ``not_found``: the message of the ``NotFoundError`` a 404 becomes (else a BackendError).
    """
    from langfuse.api import AccessDeniedError, UnauthorizedError
    from langfuse.api import NotFoundError as LangfuseNotFound
    from langfuse.api.core import ApiError

    _install_sdk_filter()
    token = _translating.set(True)
    base = base_url_of(lf)
    try:
        yield
    except LangfuseNotFound as exc:
        if not_found is not None:
            raise NotFoundError(not_found) from None
        raise BackendError(f"LangFuse at {base}: not found (404) while {what}") from exc
    except UnauthorizedError:
        raise BackendError(
            f"LangFuse at {base} rejected the API keys (401) while {what}:"
            f" check {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}"
        ) from None
    except AccessDeniedError:
        raise BackendError(
            f"LangFuse at {base} denied access (403) while {what}: the keys lack permission"
        ) from None
    except ApiError as exc:
        detail = _api_message(exc.body)
        raise BackendError(
            f"LangFuse at {base} answered {exc.status_code} while {what}"
            + (f": {detail}" if detail else "")
        ) from None
    except httpx.TimeoutException:
        raise BackendError(f"LangFuse at {base} timed out while {what}") from None
    except httpx.TransportError as exc:
        raise BackendError(
            f"cannot reach LangFuse at {base} while {what}: {_one_line(exc) or type(exc).__name__}"
        ) from None
    except ExtractionEvalError:
        raise
    except AttributeError as exc:  # the SDK's "client is not initialized" (no keys)
        if "not initialized" in str(exc):
            raise ConfigError(
                f"LangFuse client is not initialized: set {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}"
            ) from None
        raise
    except Exception as exc:
        # e.g. auth_check's "no project found for the keys provided"
        if type(exc) is Exception:
            raise BackendError(f"LangFuse at {base}: {_one_line(exc)} ({what})") from None
        raise
    finally:
        _translating.reset(token)


# --- datasets -------------------------------------------------------------------------------


def langfuse_item_id(dataset: str, item_id: str) -> str:
    """The project-wide LangFuse id of ``item_id`` in ``dataset`` (deterministic, <= 255)."""
    key = f"{dataset}:{item_id}"
    if len(key) <= MAX_ITEM_ID_LEN:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    return f"{dataset[:100]}:{item_id[:100]}~{digest}"


def _iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_version(version: int | str | datetime | None) -> datetime | None:
    if version is None:
        return None
    if isinstance(version, datetime):
        return version if version.tzinfo else version.replace(tzinfo=UTC)
    if isinstance(version, int) or not str(version).strip():
        raise UsageError(
            "LangFuse dataset versions are timestamps (as `datasets show` prints them,"
            f" e.g. 2026-01-31T12:00:00.000Z), got {version!r}"
        )
    try:
        ts = datetime.fromisoformat(str(version).strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not an ISO timestamp: {version!r}") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _status(value: Any) -> str:
    raw = getattr(value, "value", value)
    return str(raw).upper() if raw else "ACTIVE"


@dataclass(frozen=True)
class _Stored:
    """A LangFuse item normalised: our item, plus where it sits and when it last changed."""

    item: DatasetItem
    langfuse_id: str
    position: int | None
    created_at: datetime | None
    updated_at: datetime | None


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def normalise_item(raw: Any) -> _Stored:
    """One SDK ``DatasetItem`` -> our ``DatasetItem`` (the one place that knows the shapes)."""
    metadata = dict(raw.metadata) if isinstance(raw.metadata, dict) else {}
    ours = metadata.pop(META_KEY, None)
    ours = ours if isinstance(ours, dict) else {}
    item_id = str(ours.get("item_id") or raw.id)
    position = ours.get("position")
    data_input = raw.input
    if data_input is None:
        raise UsageError(f"LangFuse dataset item {raw.id} has no input")
    if isinstance(data_input, dict) and not isinstance(data_input.get("text"), str):
        raise UsageError(
            f"LangFuse dataset item {raw.id}: input has no 'text' string"
            f" (keys: {', '.join(sorted(map(str, data_input))) or 'none'})"
        )
    if not isinstance(data_input, (dict, str)):
        raise UsageError(
            f"LangFuse dataset item {raw.id}: input must be a string or"
            f" {{'text': ...}}, got {type(data_input).__name__}"
        )
    expected = _json_value(raw.expected_output)
    item = item_from_payload(
        id=item_id,
        input=data_input,
        expected_output=expected,
        metadata=metadata,
        source_trace_id=raw.source_trace_id,
        source_observation_id=raw.source_observation_id,
        status=_status(raw.status),
    )
    return _Stored(
        item=item,
        langfuse_id=str(raw.id),
        position=position if isinstance(position, int) else None,
        created_at=raw.created_at,
        updated_at=raw.updated_at,
    )


def to_dataset_item(raw: Any) -> DatasetItem:
    """An SDK ``DatasetItem`` (as ``get_dataset`` / ``run_experiment`` hand it out) -> ours,
    with our own id restored; ``UsageError`` if its input is not text or ``{"text": ...}``."""
    return normalise_item(raw).item


def _order(stored: Sequence[_Stored]) -> list[_Stored]:
    """Upload order: our recorded position first, then creation time (items made elsewhere)."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(
        stored,
        key=lambda s: (
            s.position is None,
            s.position if s.position is not None else 0,
            s.created_at or far,
            s.langfuse_id,
        ),
    )


class LangfuseDatasetBackend:
    """``DatasetBackend`` on LangFuse datasets, through the SDK.

    ``upload_items`` reads the dataset once, then upserts only new or changed items (stable
    ids), so a re-upload sends nothing and never duplicates. ``version`` is the timestamp of
    the latest item change; pass it back to ``get_items`` to read the items as they were.
    """

    def __init__(self, lf: Langfuse) -> None:
        self._lf = lf

    @classmethod
    def from_env(cls) -> LangfuseDatasetBackend:
        """Connected (and key-checked) from the LANGFUSE_* environment variables."""
        return cls(connect())

    def close(self) -> None:
        close_client(self._lf)

    # reads

    def _fetch(self, name: str, version: datetime | None = None) -> Any:
        with api_errors(
            self._lf,
            f"reading dataset {name!r}",
            not_found=f"dataset {name!r} not found in LangFuse",
        ):
            return self._lf.get_dataset(
                name, fetch_items_page_size=ITEMS_PAGE_SIZE, version=version
            )

    def _stored(self, dataset: Any) -> list[_Stored]:
        return _order([normalise_item(raw) for raw in dataset.items])

    @staticmethod
    def _version(dataset: Any, stored: Sequence[_Stored]) -> str | None:
        stamps = [s.updated_at for s in stored if s.updated_at] or [dataset.updated_at]
        return _iso(max(stamps)) if stamps and stamps[0] else None

    def _info(self, dataset: Any, stored: Sequence[_Stored]) -> DatasetInfo:
        return DatasetInfo(
            name=dataset.name,
            description=dataset.description,
            metadata=dict(dataset.metadata) if isinstance(dataset.metadata, dict) else {},
            version=self._version(dataset, stored),
            item_count=sum(1 for s in stored if s.item.status == "ACTIVE"),
            created_at=_iso(dataset.created_at),
            updated_at=_iso(dataset.updated_at),
        )

    def get_dataset(self, name: str) -> DatasetInfo:
        dataset = self._fetch(name)
        return self._info(dataset, self._stored(dataset))

    def get_items(
        self, name: str, *, version: int | str | datetime | None = None
    ) -> list[DatasetItem]:
        """Active items in upload order; ``version`` (a timestamp) reads the past."""
        dataset = self._fetch(name, _parse_version(version))
        return [s.item for s in self._stored(dataset) if s.item.status == "ACTIVE"]

    def items_by_id(self, name: str) -> dict[str, DatasetItem]:
        """Every item (any status) by our id; empty when the dataset does not exist yet."""
        try:
            dataset = self._fetch(name)
        except NotFoundError:
            return {}
        return {s.item.id: s.item for s in self._stored(dataset)}

    def list_datasets(self) -> list[DatasetInfo]:
        """Every dataset, with its item count (all statuses; one cheap request each).

        ``version`` is left empty here: computing it needs every item (``get_dataset`` does).
        """
        out: list[DatasetInfo] = []
        page = 1
        while True:
            with api_errors(self._lf, "listing datasets"):
                batch = self._lf.api.datasets.list(page=page, limit=100)
            for ds in batch.data:
                with api_errors(self._lf, f"counting the items of dataset {ds.name!r}"):
                    count = self._lf.api.dataset_items.list(
                        dataset_name=ds.name, page=1, limit=1
                    ).meta.total_items
                out.append(
                    DatasetInfo(
                        name=ds.name,
                        description=ds.description,
                        metadata=dict(ds.metadata) if isinstance(ds.metadata, dict) else {},
                        version=None,
                        item_count=int(count),
                        created_at=_iso(ds.created_at),
                        updated_at=_iso(ds.updated_at),
                    )
                )
            if page >= batch.meta.total_pages:
                break
            page += 1
        return sorted(out, key=lambda d: d.name)

    # writes

    def upload_items(
        self,
        dataset: str,
        items: Sequence[DatasetItem],
        *,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> UploadReport:
        """Create the dataset if missing and upsert new or changed items by stable id."""
        name = dataset.strip()
        if not name:
            raise UsageError("dataset name must not be empty")
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                raise UsageError(f"item id {item.id!r} appears twice in one upload")
            seen.add(item.id)

        try:
            current = self._fetch(name)
        except NotFoundError:
            current = None
        dataset_created = current is None
        if current is None:
            with api_errors(self._lf, f"creating dataset {name!r}"):
                self._lf.create_dataset(name=name, description=description, metadata=metadata)
            existing: dict[str, _Stored] = {}
            version: str | None = None
        else:
            stored = self._stored(current)
            existing = {s.item.id: s for s in stored}
            version = self._version(current, stored)
            header_metadata = current.metadata if isinstance(current.metadata, dict) else {}
            if (description is not None and description != current.description) or (
                metadata is not None and metadata != header_metadata
            ):
                log.warning(
                    "dataset %r already exists in LangFuse: its description and metadata"
                    " were left unchanged",
                    name,
                )
        next_position = 1 + max(
            (s.position for s in existing.values() if s.position is not None), default=-1
        )
        created = updated = unchanged = 0
        latest: list[datetime] = []
        for item in items:
            previous = existing.get(item.id)
            if previous is not None and item_content_hash(previous.item) == item_content_hash(item):
                unchanged += 1
                continue
            if previous is not None and previous.position is not None:
                position = previous.position
            else:
                position, next_position = next_position, next_position + 1
            lf_id = previous.langfuse_id if previous else langfuse_item_id(name, item.id)
            result = self._upsert(name, item, lf_id, position)
            if result.updated_at:
                latest.append(result.updated_at)
            if previous is None:
                created += 1
            else:
                updated += 1
        if latest:
            version = _iso(max(latest))
        return UploadReport(
            dataset=name,
            version=version,
            created=created,
            updated=updated,
            unchanged=unchanged,
            new_version=bool(created or updated),
            dataset_created=dataset_created,
        )

    def _upsert(self, dataset: str, item: DatasetItem, lf_id: str, position: int) -> Any:
        from langfuse.api import DatasetStatus

        with api_errors(self._lf, f"uploading item {item.id!r} to dataset {dataset!r}"):
            return self._lf.create_dataset_item(
                dataset_name=dataset,
                id=lf_id,
                input=item_input(item),
                expected_output=item_expected_output(item),
                metadata={**item.metadata, META_KEY: {"item_id": item.id, "position": position}},
                source_trace_id=item.source_trace_id,
                source_observation_id=item.source_observation_id,
                status=DatasetStatus(item.status),
            )


# --- prompts --------------------------------------------------------------------------------


def _client_messages(client: Any) -> list[dict[str, str]]:
    """A LangFuse prompt client's raw templates as chat messages (text prompt -> one user msg)."""
    raw = getattr(client, "prompt", None)
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    out: list[dict[str, str]] = []
    for message in raw or []:
        if message.get("type", "message") == "message":
            out.append({"role": str(message["role"]), "content": str(message["content"])})
    return out


def _selector(label: str | None, version: int | None) -> str:
    if version is not None:
        return f"version {version}"
    return f"label {label!r}" if label else "label 'production'"


def fetch_prompt(
    lf: Langfuse,
    name: str = PROMPT_NAME,
    label: str | None = None,
    version: int | None = None,
    *,
    cache_ttl_seconds: int | None = None,
    max_retries: int | None = None,
    fetch_timeout_s: int | None = None,
    warnings: list[str] | None = None,
) -> PromptTemplate:
    """The extraction prompt from LangFuse prompt management (``source="langfuse"``, with the
    version and the prompt client for linking generations).

    When the fetch fails the local template comes back with ``source="fallback"`` and a
    warning is logged and appended to ``warnings``: the run goes on, visibly. Caching and
    retries are the SDK's (``cache_ttl_seconds``, ``max_retries``).
    """
    if label is not None and version is not None:
        raise UsageError("pass a prompt label or a prompt version, not both")
    _install_sdk_filter()
    token = _translating.set(True)
    try:
        client = lf.get_prompt(
            name,
            label=label,
            version=version,
            type="chat",
            cache_ttl_seconds=cache_ttl_seconds,
            max_retries=max_retries,
            fetch_timeout_seconds=fetch_timeout_s,
        )
    except Exception as exc:
        reason = _fetch_failure(exc)
        message = (
            f"prompt {name!r} ({_selector(label, version)}) could not be fetched from LangFuse"
            f" ({reason}); using the local template (prompt_source=fallback)"
        )
        log.warning(message)
        if warnings is not None:
            warnings.append(message)
        local = load_local_prompt()
        return replace(local, label=label, version=None, source="fallback", client=None)
    finally:
        _translating.reset(token)

    messages = _client_messages(client)
    if "text" not in PromptTemplate(name=name, messages=messages).variables:
        message = f"LangFuse prompt {name!r} v{client.version} has no {{{{text}}}} variable"
        log.warning(message)
        if warnings is not None:
            warnings.append(message)
    return PromptTemplate(
        name=name,
        messages=messages,
        version=int(client.version),
        label=label,
        source="langfuse",
        client=client,
    )


def _fetch_failure(exc: BaseException) -> str:
    from langfuse.api import NotFoundError as LangfuseNotFound
    from langfuse.api import UnauthorizedError
    from langfuse.api.core import ApiError

    if isinstance(exc, LangfuseNotFound):
        return "not found"
    if isinstance(exc, UnauthorizedError):
        return "keys rejected (401)"
    if isinstance(exc, ApiError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, httpx.TransportError):
        return f"unreachable: {_one_line(exc) or type(exc).__name__}"
    return _one_line(exc) or type(exc).__name__


def push_prompt(
    lf: Langfuse,
    name: str = PROMPT_NAME,
    label: str = "staging",
    *,
    template: PromptTemplate | None = None,
    force: bool = False,
) -> int:
    """Create the local template (or ``template``) as a LangFuse chat prompt with ``label``;
    returns the version that carries the label.

    If the prompt at ``label`` already has exactly these messages, no new version is made
    (``force=True`` makes one anyway).
    """
    from langfuse.api import NotFoundError as LangfuseNotFound

    template = template or load_local_prompt()
    base = base_url_of(lf)
    if not force:
        _install_sdk_filter()
        token = _translating.set(True)
        try:
            current: Any = lf.get_prompt(
                name, label=label, type="chat", cache_ttl_seconds=0, max_retries=0
            )
        except LangfuseNotFound:
            current = None
        except Exception as exc:
            raise BackendError(
                f"LangFuse at {base}: reading prompt {name!r} failed ({_fetch_failure(exc)})"
            ) from None
        finally:
            _translating.reset(token)
        if current is not None and messages_hash(_client_messages(current)) == (
            template.content_hash
        ):
            return int(current.version)
    with api_errors(lf, f"creating prompt {name!r}"):
        created = lf.create_prompt(
            name=name,
            prompt=cast(Any, template.messages),
            labels=[label],
            type="chat",
            config={"source": "extraction-eval", "content_hash": template.content_hash},
            commit_message=f"extraction-eval prompts push (sha256 {template.content_hash[:12]})",
        )
    return int(created.version)


# --- tracing --------------------------------------------------------------------------------


def _prompt_client(prompt: Any) -> Any:
    """A LangFuse prompt client to link, from a client or a ``PromptTemplate`` (else None)."""
    if prompt is None:
        return None
    if isinstance(prompt, PromptTemplate):
        return prompt.client
    if hasattr(prompt, "is_fallback") and hasattr(prompt, "version"):
        return prompt
    return None


class _Generation:
    def __init__(self, observation: Any) -> None:
        self._observation = observation
        self.level_set = False

    def update(
        self,
        *,
        output: Any = None,
        usage_details: dict[str, int] | None = None,
        level: str | None = None,
        status_message: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if level is not None:
            self.level_set = True
        self._observation.update(
            output=output,
            usage_details=usage_details,
            level=level,
            status_message=status_message,
            metadata=metadata,
        )


class LangfuseTracer:
    """``CallTracer`` as a LangFuse ``generation`` observation under the current span (so in
    an experiment it lands in the item's trace), linked to the prompt version when a LangFuse
    prompt client is given. An exception escaping the block marks it level ERROR."""

    def __init__(self, lf: Langfuse) -> None:
        self._lf = lf

    @contextmanager
    def generation(
        self,
        *,
        name: str,
        model: str,
        model_parameters: dict[str, Any],
        input: Any,
        prompt: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> Iterator[GenerationHandle]:
        with self._lf.start_as_current_observation(
            as_type="generation",
            name=name,
            model=model,
            model_parameters=model_parameters,
            input=input,
            prompt=_prompt_client(prompt),
            metadata=metadata,
        ) as observation:
            handle = _Generation(observation)
            try:
                yield handle
            except BaseException as exc:
                if not handle.level_set:
                    observation.update(
                        level="ERROR", status_message=_one_line(exc) or type(exc).__name__
                    )
                raise


# --- read-back ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyReport:
    """What arrived in LangFuse after a run, and what did not (within the wait)."""

    expected_traces: int
    expected_scores: int
    missing_traces: tuple[str, ...] = ()
    missing_scores: tuple[tuple[str, str], ...] = ()  # (trace_id, score name)
    missing_run_scores: tuple[str, ...] = ()
    waited_s: float = 0.0
    errors: tuple[str, ...] = field(default_factory=tuple)  # read failures seen while polling

    @property
    def ok(self) -> bool:
        return not (self.missing_traces or self.missing_scores or self.missing_run_scores)

    def __str__(self) -> str:
        return "; ".join(self.lines(limit=3))

    def lines(self, limit: int = 10) -> list[str]:
        """One line per kind of gap (first ``limit`` ids each), for the CLI."""
        if self.ok:
            return [
                f"verified in LangFuse: {self.expected_traces} traces,"
                f" {self.expected_scores} scores ({self.waited_s:.1f}s)"
            ]
        out: list[str] = []
        if self.missing_traces:
            shown = ", ".join(self.missing_traces[:limit])
            more = len(self.missing_traces) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_traces)} of {self.expected_traces}"
                f" traces ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.missing_scores:
            shown = ", ".join(f"{n}@{t}" for t, n in self.missing_scores[:limit])
            more = len(self.missing_scores) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_scores)} of {self.expected_scores}"
                f" item scores ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.missing_run_scores:
            shown = ", ".join(self.missing_run_scores[:limit])
            more = len(self.missing_run_scores) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_run_scores)} run scores"
                f" ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.errors:
            out.append(f"last read error: {self.errors[-1]}")
        return out


def _score_trace_id(score: Mapping[str, Any]) -> str | None:
    subject = score.get("subject") or {}
    kind = subject.get("kind")
    if kind == "trace":
        return cast("str | None", subject.get("id"))
    if kind == "observation":
        return cast("str | None", subject.get("traceId"))
    return None


def _score_pages(lf: Langfuse, **params: Any) -> Iterator[list[dict[str, Any]]]:
    """Pages of ``GET /api/public/v3/scores`` as plain JSON.

    Sent through the SDK's own HTTP client (its auth, base URL and retries), but read as JSON
    rather than through the SDK's generated models: parsing each score into those models costs
    about 4 ms, which made verifying a 1,000-item run take minutes. Only names and subjects
    are needed here.
    """
    http = lf.api._client_wrapper.httpx_client
    query = {k: v for k, v in params.items() if v is not None}
    cursor: str | None = None
    while True:
        response = http.request(
            "api/public/v3/scores", method="GET", params={**query, "cursor": cursor}, retries=0
        )
        if response.status_code >= 400:
            raise BackendError(
                f"reading scores back failed: HTTP {response.status_code}"
                f" {response.text[:200].strip()}"
            )
        body = response.json()
        yield list(body.get("data") or [])
        cursor = (body.get("meta") or {}).get("cursor")
        if not cursor:
            return


def _chunks(values: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _arrived_traces(lf: Langfuse, wanted: set[str], since: datetime | None) -> set[str]:
    found: set[str] = set()
    if since is not None:  # one window query, paged, instead of one request per trace
        cursor: str | None = None
        while True:
            page = lf.api.observations.get_many(
                is_root_observation=True,
                from_start_time=since,
                fields="core",
                limit=1000,
                cursor=cursor,
            )
            found.update(o.trace_id for o in page.data if o.trace_id in wanted)
            cursor = page.meta.cursor
            if not cursor or found >= wanted:
                return found
    for trace_id in sorted(wanted):
        page = lf.api.observations.get_many(trace_id=trace_id, fields="core", limit=1)
        if page.data:
            found.add(trace_id)
    return found


def _arrived_scores(
    lf: Langfuse, trace_ids: Sequence[str], names: Sequence[str]
) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for chunk in _chunks(sorted(trace_ids), 20):
        pages = _score_pages(
            lf, traceId=",".join(chunk), name=",".join(names), fields="subject", limit=100
        )
        for page in pages:
            for score in page:
                trace_id = _score_trace_id(score)
                if trace_id is not None:
                    found.add((trace_id, str(score.get("name"))))
    return found


def _arrived_run_scores(lf: Langfuse, experiment_id: str, names: Sequence[str]) -> set[str]:
    pages = _score_pages(lf, experimentId=experiment_id, name=",".join(names), limit=100)
    return {str(score.get("name")) for page in pages for score in page}


def read_back(
    lf: Langfuse,
    *,
    trace_ids: Sequence[str],
    score_names: Sequence[str] = (),
    experiment_id: str | None = None,
    run_score_names: Sequence[str] = (),
    since: datetime | None = None,
    timeout_s: float = 60.0,
    poll_s: float = 2.0,
) -> VerifyReport:
    """Poll LangFuse (bounded by ``timeout_s``) until every trace (observations v2) and every
    ``score_names`` score on each trace (scores v3) arrived, plus ``run_score_names`` on the
    experiment; report what is still missing. Call after ``lf.flush()``.

    ``since`` (the run's start) lets traces be found with a few paged window queries instead
    of one request per trace. Read failures are kept in ``errors`` and polling continues.
    """
    started = time.monotonic()
    deadline = started + max(timeout_s, 0.0)
    traces = set(trace_ids)
    missing_traces = set(traces)
    missing_scores = {(t, n) for t in traces for n in score_names}
    missing_run = set(run_score_names) if experiment_id else set()
    errors: list[str] = []
    while True:
        try:
            with api_errors(lf, "reading back traces and scores"):
                if missing_traces:
                    missing_traces -= _arrived_traces(lf, missing_traces, since)
                if missing_scores:
                    pending = sorted({t for t, _ in missing_scores})
                    missing_scores -= _arrived_scores(lf, pending, list(score_names))
                if missing_run and experiment_id:
                    missing_run -= _arrived_run_scores(lf, experiment_id, sorted(missing_run))
        except ExtractionEvalError as exc:
            errors.append(str(exc))
        done = not (missing_traces or missing_scores or missing_run)
        if done or time.monotonic() + poll_s > deadline:
            break
        time.sleep(poll_s)
    return VerifyReport(
        expected_traces=len(traces),
        expected_scores=len(traces) * len(set(score_names)),
        missing_traces=tuple(sorted(missing_traces)),
        missing_scores=tuple(sorted(missing_scores)),
        missing_run_scores=tuple(sorted(missing_run)),
        waited_s=round(time.monotonic() - started, 3),
        errors=tuple(errors[-5:]),
    )
