"""Seed a dataset from production traces: the trace's input text and its validated extraction.

Which extraction becomes the expected output
    1. A human correction, when one is recorded: LangFuse's *corrected output*, i.e. a score
       with data type ``CORRECTION`` (LangFuse always names it ``output``) on the trace or on
       its root observation, whose value is the corrected output as JSON, in the same shape
       as the observation's output. The latest one wins. Item metadata: ``seed_source =
       "correction"`` and ``correction_score_id``.
    2. Otherwise the root observation's output (``seed_source = "output"``).
    A correction that is not a valid extraction is reported, not replaced by the raw output.

How a trace is marked validated
    However your team records it, as long as it can be selected: a tag (``--tag validated``;
    set with ``propagate_attributes(tags=[...])`` or in the LangFuse UI) or a score
    (``--score validated=1``, ``--score review=approved``; from an annotation queue or the
    API). Selection and source are independent: a correction alone does not select a trace.

Trace shape
    Root observation input ``{"text": ..., "schema": {...}?}`` or a plain string
    (``input_path`` picks another place, dotted, list indices allowed: ``messages.1.content``);
    output ``{"entities": [...], "relationships": [...]}`` (``output_path`` picks another
    place, e.g. ``result.extraction``; a JSON string found there is parsed).

Items get the id ``from-{trace_id}`` (stored under the backend's project-wide id) with
``source_trace_id`` / ``source_observation_id``, so seeding the same trace again updates one
item. Traces that are not usable are skipped with one line each naming the trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from extraction_eval.backends.base import UploadReport, item_content_hash
from extraction_eval.backends.langfuse import LangfuseDatasetBackend, api_errors
from extraction_eval.errors import InvalidValue, SchemaFailure, UsageError
from extraction_eval.prompts.contract import coerce_extraction
from extraction_eval.textsafe import clean_json_value
from extraction_eval.types import DatasetItem, Extraction, Schema

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = [
    "DEFAULT_DATASET",
    "ScoreFilter",
    "SeedItem",
    "SeedReport",
    "parse_since",
    "seed_from_traces",
]

DEFAULT_DATASET = "extraction-eval"
ROOT_FIELDS = "core,basic,io,metadata,trace_context"
SeedSource = Literal["output", "correction"]
Action = Literal["create", "update", "unchanged"]

_SINCE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class _Invalid(Exception):
    """A trace that cannot become an item; the message names the problem."""


# --- options --------------------------------------------------------------------------------


def parse_since(value: str | datetime, *, now: datetime | None = None) -> datetime:
    """``"7d"``, ``"24h"``, ``"30m"``, ``"2w"`` or an ISO date/time -> an aware UTC datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    match = _SINCE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidValue(
            "since", f"expects an age like 7d, 24h, 30m, 2w or an ISO date, got {value!r}"
        ) from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _as_bool(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    return None


@dataclass(frozen=True)
class ScoreFilter:
    """``name=value``: the trace has a score ``name`` equal to ``value`` (numbers compare as
    numbers, booleans accept true/false/1/0, anything else compares as text)."""

    name: str
    value: str

    @classmethod
    def parse(cls, raw: str | ScoreFilter) -> ScoreFilter:
        if isinstance(raw, ScoreFilter):
            return raw
        name, sep, value = raw.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidValue("score", f"expects NAME=VALUE, got {raw!r}")
        return cls(name.strip(), value.strip())

    def matches(self, score: Any) -> bool:
        if getattr(score, "name", None) != self.name:
            return False
        actual = score.value
        if isinstance(actual, bool):
            return _as_bool(self.value) is actual
        if isinstance(actual, (int, float)):
            try:
                return float(self.value) == float(actual)
            except ValueError:
                return False
        return str(actual) == self.value

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


# --- report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedItem:
    """One trace turned into a dataset item, and what the upload does (or would do) with it."""

    trace_id: str
    observation_id: str
    item: DatasetItem
    source: SeedSource
    action: Action


@dataclass(frozen=True)
class SeedReport:
    dataset: str
    dry_run: bool
    items: tuple[SeedItem, ...] = ()
    skipped: tuple[str, ...] = ()  # "trace <id>: <problem>", one per unusable trace
    not_selected: int = 0  # bulk candidates that failed a filter (not listed)
    upload: UploadReport | None = None  # None on a dry run or when nothing was selected
    explicit: bool = False  # trace ids were named (a skipped one is then a failure)

    def count(self, action: Action) -> int:
        return sum(1 for it in self.items if it.action == action)


# --- reading traces -------------------------------------------------------------------------


def _chunks(values: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _earliest(observations: Iterable[Any]) -> dict[str, Any]:
    """One root observation per trace: the earliest (a trace may have several app roots)."""
    out: dict[str, Any] = {}
    for obs in observations:
        if obs.trace_id is None:
            continue
        known = out.get(obs.trace_id)
        if known is None or (obs.start_time, obs.id) < (known.start_time, known.id):
            out[obs.trace_id] = obs
    return out


def _root(lf: Langfuse, trace_id: str) -> Any | None:
    page = lf.api.observations.get_many(
        trace_id=trace_id, is_root_observation=True, fields=ROOT_FIELDS, limit=50
    )
    return _earliest(page.data).get(trace_id)


def _query_roots(lf: Langfuse, tag: str | None, since: datetime | None) -> dict[str, Any]:
    # Every condition is also in the structured filter, which takes precedence over the
    # plain query parameters on the server.
    conditions: list[dict[str, Any]] = [
        {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True}
    ]
    if tag:
        conditions.append(
            {"type": "arrayOptions", "column": "tags", "operator": "any of", "value": [tag]}
        )
    if since is not None:
        conditions.append(
            {
                "type": "datetime",
                "column": "startTime",
                "operator": ">=",
                "value": since.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            }
        )
    found: list[Any] = []
    cursor: str | None = None
    while True:
        page = lf.api.observations.get_many(
            is_root_observation=True,
            from_start_time=since,
            fields=ROOT_FIELDS,
            limit=100,
            cursor=cursor,
            filter=json.dumps(conditions),
        )
        found.extend(page.data)
        cursor = page.meta.cursor
        if not cursor:
            return _earliest(found)


def _score_trace_id(score: Any) -> str | None:
    subject = getattr(score, "subject", None)
    kind = getattr(subject, "kind", None)
    if kind == "trace":
        return str(getattr(subject, "id", "")) or None
    if kind == "observation":
        trace_id = getattr(subject, "trace_id", None)
        return str(trace_id) if trace_id else None
    return None


def _traces_with_scores(lf: Langfuse, names: Sequence[str]) -> list[str]:
    trace_ids: list[str] = []
    cursor: str | None = None
    while True:
        page = lf.api.scores.get_many(
            name=",".join(sorted(set(names))), fields="subject", limit=100, cursor=cursor
        )
        for score in page.data:
            trace_id = _score_trace_id(score)
            if trace_id and trace_id not in trace_ids:
                trace_ids.append(trace_id)
        cursor = page.meta.cursor
        if not cursor:
            return trace_ids


def _scores_by_trace(lf: Langfuse, trace_ids: Sequence[str]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for chunk in _chunks(sorted(trace_ids), 20):
        cursor: str | None = None
        while True:
            page = lf.api.scores.get_many(
                trace_id=",".join(chunk), fields="subject,details", limit=100, cursor=cursor
            )
            for score in page.data:
                trace_id = _score_trace_id(score)
                if trace_id:
                    out.setdefault(trace_id, []).append(score)
            cursor = page.meta.cursor
            if not cursor:
                break
    return out


# --- turning a trace into an item -----------------------------------------------------------


def _parse_io(raw: Any) -> Any:
    """v2 observations return input/output as raw strings: JSON objects/arrays are decoded,
    anything else (a plain-text input) stays the string it is."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        return value if isinstance(value, (dict, list)) else raw
    return raw


def _walk(value: Any, path: str, what: str) -> Any:
    current = value
    for part in path.split("."):
        if isinstance(current, str):
            current = _parse_io(current)
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            if not -len(current) <= index < len(current):
                raise _Invalid(f"{what} has no {path!r} (index {index} out of range)")
            current = current[index]
        else:
            raise _Invalid(f"{what} has no {path!r} (missing {part!r})")
    return current


def _input(raw: Any, input_path: str | None) -> tuple[str, Schema | None]:
    if raw is None:
        raise _Invalid("trace has no input")
    value = _parse_io(raw)
    schema: Any = None
    if input_path:
        value = _walk(value, input_path, "input")
    elif isinstance(value, dict):
        if "text" not in value:
            keys = ", ".join(sorted(map(str, value))[:5]) or "none"
            raise _Invalid(f"input has no 'text' (keys: {keys}); point input_path at the text")
        schema = value.get("schema")
        value = value["text"]
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"input text is empty or not a string ({type(value).__name__})")
    if schema is None:
        return value, None
    try:
        return value, Schema.model_validate(schema)
    except ValidationError:
        raise _Invalid("input 'schema' is not {entity_types, relationship_types}") from None


def _extraction(raw: Any, output_path: str | None, what: str) -> Extraction:
    if raw is None:
        raise _Invalid(f"{what} is empty")
    value = _parse_io(raw)
    if output_path:
        value = _walk(value, output_path, what)
    try:
        return coerce_extraction(value)
    except SchemaFailure as exc:
        raise _Invalid(f"{what} is not a valid extraction: {exc}") from None


def _correction(scores: Sequence[Any], root: Any) -> Any | None:
    """The latest CORRECTION score on the trace or on its root observation."""
    candidates = []
    for score in scores:
        if getattr(score, "data_type", None) != "CORRECTION":
            continue
        subject = getattr(score, "subject", None)
        kind = getattr(subject, "kind", None)
        if kind == "observation" and getattr(subject, "id", None) != root.id:
            continue  # a correction of a child observation has that observation's shape
        candidates.append(score)
    if not candidates:
        return None
    return max(candidates, key=lambda s: (s.timestamp, s.id))


def trace_to_item(
    root: Any,
    scores: Sequence[Any] = (),
    *,
    input_path: str | None = None,
    output_path: str | None = None,
) -> tuple[DatasetItem, SeedSource]:
    """A root observation (plus its trace's scores) -> a dataset item; ``_Invalid`` if not.

    Production text may hold a lone UTF-16 surrogate (a truncated emoji, ``"\\ud800"`` in
    JSON) that no store or request body accepts (LangFuse's Postgres refuses the item): it is
    replaced by U+FFFD, and the item's metadata says ``text_repaired``."""
    correction = _correction(scores, root)
    (raw_input, raw_output, raw_correction), repaired = clean_json_value(
        [_parse_io(root.input), _parse_io(root.output), _parse_io(correction and correction.value)]
    )
    text, schema = _input(raw_input, input_path)
    metadata: dict[str, Any] = {}
    source: SeedSource
    if correction is not None:
        expected = _extraction(raw_correction, output_path, "correction")
        source = "correction"
        metadata["correction_score_id"] = correction.id
    else:
        expected = _extraction(raw_output, output_path, "output")
        source = "output"
    metadata["seed_source"] = source
    if repaired:
        metadata["text_repaired"] = True
    if getattr(root, "trace_name", None):
        metadata["trace_name"] = root.trace_name
    item = DatasetItem.model_validate(
        {
            "id": f"from-{root.trace_id}",
            "text": text,
            "schema": schema,
            "expected": expected,
            "metadata": metadata,
            "source_trace_id": root.trace_id,
            "source_observation_id": root.id,
        }
    )
    return item, source


def _not_selected(
    root: Any,
    scores: Sequence[Any],
    *,
    tag: str | None,
    since: datetime | None,
    filters: Sequence[ScoreFilter],
) -> str | None:
    if tag and tag not in (root.tags or []):
        return f"not tagged {tag!r}"
    if since is not None and root.start_time < since:
        return f"started before {since.isoformat()}"
    for f in filters:
        if not any(f.matches(s) for s in scores):
            return f"has no score {f}"
    return None


# --- the entry point ------------------------------------------------------------------------


def seed_from_traces(
    lf: Langfuse,
    *,
    dataset: str = DEFAULT_DATASET,
    trace_ids: Sequence[str] = (),
    tag: str | None = None,
    since: str | datetime | None = None,
    score_filters: Sequence[str | ScoreFilter] = (),
    input_path: str | None = None,
    output_path: str | None = None,
    dry_run: bool = False,
) -> SeedReport:
    """Create (or update) one dataset item per selected production trace.

    Traces are the named ``trace_ids`` (filters, when given, must also hold for them), or,
    without ids, every root observation selected by ``tag`` / ``since`` / ``score_filters``.
    ``dry_run`` reads everything and writes nothing.
    """
    filters = tuple(ScoreFilter.parse(f) for f in score_filters)
    since_dt = parse_since(since) if since is not None else None
    explicit = list(dict.fromkeys(t.strip() for t in trace_ids if t and t.strip()))
    if not explicit and not (tag or since_dt or filters):
        raise UsageError("name trace ids, or select traces by tag, since or score")
    if not dataset.strip():
        raise UsageError("dataset name must not be empty")

    skipped: list[str] = []
    with api_errors(lf, "reading production traces"):
        roots: dict[str, Any] = {}
        if explicit:
            for trace_id in explicit:
                root = _root(lf, trace_id)
                if root is None:
                    skipped.append(f"trace {trace_id}: not found (no root observation)")
                else:
                    roots[trace_id] = root
        elif tag or since_dt:
            roots = _query_roots(lf, tag, since_dt)
        else:
            for trace_id in _traces_with_scores(lf, [f.name for f in filters]):
                root = _root(lf, trace_id)
                if root is not None:
                    roots[trace_id] = root
        scores = _scores_by_trace(lf, list(roots))

    selected: list[tuple[str, Any, DatasetItem, SeedSource]] = []
    not_selected = 0
    for trace_id, root in sorted(roots.items(), key=lambda kv: (kv[1].start_time, kv[0])):
        trace_scores = scores.get(trace_id, [])
        reason = _not_selected(root, trace_scores, tag=tag, since=since_dt, filters=filters)
        if reason is not None:
            if explicit:
                skipped.append(f"trace {trace_id}: {reason}")
            else:
                not_selected += 1
            continue
        try:
            item, source = trace_to_item(
                root, trace_scores, input_path=input_path, output_path=output_path
            )
        except _Invalid as exc:
            skipped.append(f"trace {trace_id}: {exc}")
            continue
        selected.append((trace_id, root, item, source))

    backend = LangfuseDatasetBackend(lf)
    existing = backend.items_by_id(dataset) if selected else {}
    items: list[SeedItem] = []
    for trace_id, root, item, source in selected:
        before = existing.get(item.id)
        if before is not None and before.status != item.status:
            item = item.model_copy(update={"status": before.status})  # keep an archival
        action: Action
        if before is None:
            action = "create"
        elif item_content_hash(before) == item_content_hash(item):
            action = "unchanged"
        else:
            action = "update"
        items.append(SeedItem(trace_id, str(root.id), item, source, action))

    upload = None
    if items and not dry_run:
        upload = backend.upload_items(dataset, [s.item for s in items])
    return SeedReport(
        dataset=dataset,
        dry_run=dry_run,
        items=tuple(items),
        skipped=tuple(skipped),
        not_selected=not_selected,
        upload=upload,
        explicit=bool(explicit),
    )
