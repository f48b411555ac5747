"""SDK and HTTP failures as one-line domain errors (``api_errors``), and the filter that
drops the SDK's own generic log line for a failure we translate."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx

from extraction_eval.backends.langfuse.client import ENV_PUBLIC_KEY, ENV_SECRET_KEY, base_url_of
from extraction_eval.errors import (
    BackendError,
    ConfigError,
    ExtractionEvalError,
    NotFoundError,
    one_line,
)

if TYPE_CHECKING:
    from langfuse import Langfuse


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


def _api_message(body: Any) -> str:
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            if body.get(key):
                return one_line(body[key])
        return one_line(json.dumps(body))
    return one_line(body) if body else ""


@contextmanager
def api_errors(lf: Langfuse, what: str, *, not_found: str | None = None) -> Iterator[None]:
    """Translate SDK / HTTP failures raised inside the block into one-line domain errors.

    ``not_found``: the message of the ``NotFoundError`` a 404 becomes (else a BackendError).
    """
    from langfuse.api import AccessDeniedError, UnauthorizedError
    from langfuse.api import NotFoundError as LangfuseNotFound
    from langfuse.api.core import ApiError
    from pydantic import ValidationError

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
            f"cannot reach LangFuse at {base} while {what}: {one_line(exc)}"
        ) from None
    except ExtractionEvalError:
        raise
    except ValidationError as exc:  # an answer the SDK's models refuse (a hostile server)
        found = exc.errors()
        msg, loc = (found[0]["msg"], found[0]["loc"]) if found else (str(exc), ())
        where = ".".join(str(p) for p in loc) or "the top"
        raise BackendError(
            f"LangFuse at {base} sent an answer that does not read while {what}:"
            f" {one_line(msg)} at {where}"
        ) from None
    except AttributeError as exc:  # the SDK's "client is not initialized" (no keys)
        if "not initialized" in str(exc):
            raise ConfigError(
                f"LangFuse client is not initialized: set {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}"
            ) from None
        raise
    except Exception as exc:
        # e.g. auth_check's "no project found for the keys provided"
        if type(exc) is Exception:
            raise BackendError(f"LangFuse at {base}: {one_line(exc)} ({what})") from None
        raise
    finally:
        _translating.reset(token)
