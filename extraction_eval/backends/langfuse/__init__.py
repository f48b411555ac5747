"""LangFuse adapters: thin layers over the ``langfuse`` SDK 5 (never re-implementing what it does).

- ``client``: ``connect`` / ``check_auth`` / ``langfuse_configured``: a client, and a fail-fast
  key check that turns bad keys or an unreachable server into one-line ``BackendError``\\ s.
- ``errors``: ``api_errors``, SDK / HTTP failures as one-line domain errors.
- ``datasets``: ``LangfuseDatasetBackend``, the ``DatasetBackend`` protocol on LangFuse datasets.
- ``prompts``: ``fetch_prompt`` / ``push_prompt``, the extraction prompt via LangFuse prompt
  management, falling back to the local template visibly; ``ensure_chat_prompt``, the judge's.
- ``tracer``: ``LangfuseTracer``, the ``CallTracer`` seam as a LangFuse ``generation``.
- ``scores``: posting scores, and deterministic ids for run-level ones.
- ``readback``: ``read_back`` / ``verify_run``, after a run poll LangFuse until every trace and
  score arrived (``verify_timeout_s``: how long), ``missing_summary`` what did not.

Secrets never appear in messages: errors name the server URL and the status, not the keys.
"""

from extraction_eval.backends.langfuse.client import (
    ALLOW_OLD_ENV,
    ENV_BASE_URL,
    ENV_HOST,
    ENV_PUBLIC_KEY,
    ENV_SECRET_KEY,
    MIN_SERVER_VERSION,
    base_url_of,
    check_auth,
    check_server_version,
    close_client,
    connect,
    langfuse_configured,
    resolve_base_url,
)
from extraction_eval.backends.langfuse.datasets import (
    META_KEY,
    LangfuseDatasetBackend,
    RunDataset,
    langfuse_item_id,
    normalise_item,
)
from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.backends.langfuse.prompts import (
    ensure_chat_prompt,
    fetch_prompt,
    push_prompt,
)
from extraction_eval.backends.langfuse.readback import (
    DEFAULT_VERIFY_TIMEOUT_S,
    VERIFY_TIMEOUT_ENV,
    VerifyReport,
    missing_summary,
    read_back,
    read_back_run,
    verify_run,
    verify_timeout_s,
)
from extraction_eval.backends.langfuse.scores import (
    experiment_id_for,
    item_score_id,
    post_score,
    run_score_id,
)
from extraction_eval.backends.langfuse.tracer import LangfuseTracer, wire_json

__all__ = [
    "ALLOW_OLD_ENV",
    "DEFAULT_VERIFY_TIMEOUT_S",
    "ENV_BASE_URL",
    "ENV_HOST",
    "ENV_PUBLIC_KEY",
    "ENV_SECRET_KEY",
    "META_KEY",
    "MIN_SERVER_VERSION",
    "VERIFY_TIMEOUT_ENV",
    "LangfuseDatasetBackend",
    "LangfuseTracer",
    "RunDataset",
    "VerifyReport",
    "api_errors",
    "base_url_of",
    "check_auth",
    "check_server_version",
    "close_client",
    "connect",
    "ensure_chat_prompt",
    "experiment_id_for",
    "fetch_prompt",
    "item_score_id",
    "langfuse_configured",
    "langfuse_item_id",
    "missing_summary",
    "normalise_item",
    "post_score",
    "push_prompt",
    "read_back",
    "read_back_run",
    "resolve_base_url",
    "run_score_id",
    "verify_run",
    "verify_timeout_s",
    "wire_json",
]
