"""A schema file (``--schema schema.json``): the types to extract, declared attributes, and
``labels`` (gold label -> the label the pipeline is asked for and scored with)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from extraction_eval.errors import InvalidValue, one_line
from extraction_eval.limits import MAX_SCHEMA_BYTES
from extraction_eval.regular_files import NotReadable, read_regular
from extraction_eval.types import DatasetItem, Schema


def read_schema(path: str | Path, *, field: str = "schema") -> Schema:
    """The ``Schema`` in a JSON file: the object itself, or ``{"schema": {...}}`` (a dataset
    line's key). A file that is not one is an ``InvalidValue`` on ``field``."""
    path = Path(path)
    try:
        # a regular file only: a FIFO named as the schema would wait for a writer forever
        raw = json.loads(read_regular(path, MAX_SCHEMA_BYTES).decode("utf-8"))
    except NotReadable as exc:
        raise InvalidValue(field, str(exc)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InvalidValue(field, f"{path}: {one_line(exc)}") from None
    if isinstance(raw, dict) and isinstance(raw.get("schema"), dict) and len(raw) == 1:
        raw = raw["schema"]
    if not isinstance(raw, dict):
        raise InvalidValue(field, f"{path}: a schema is a JSON object")
    known = set(Schema.model_fields)
    unknown = sorted(set(raw) - known)
    if unknown:  # a typo ("label") would otherwise be dropped silently
        raise InvalidValue(
            field,
            f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})",
        )
    try:
        return Schema.model_validate(raw)
    except ValidationError as exc:
        raise InvalidValue(field, f"{path}: {one_line(exc)}") from None


def with_dataset_schema(
    items: Iterable[DatasetItem], schema: Schema | None
) -> Iterator[DatasetItem]:
    """Items as a file carries them: each without a schema of its own gets the dataset's, so
    the file says what a run of the dataset asks for (a file has no dataset header)."""
    for item in items:
        yield (
            item
            if schema is None or item.schema_ is not None
            else item.model_copy(update={"schema_": schema})
        )
