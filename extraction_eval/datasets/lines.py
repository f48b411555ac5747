"""The one JSONL line reader behind gold files, prediction files and dataset uploads.

Every file this package reads is one JSON object a line, keyed by ``"id"``. A bad line never
stops the file: it becomes one warning in one format, ``FILE:LINE (id X): problem; skipped``
(the id part only when the id could be read), so ``score`` and ``datasets upload`` word the
same bad line the same way. Only a file that cannot be opened at all raises ``UsageError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from extraction_eval.errors import UsageError, one_line

T = TypeVar("T")

# The id of a line that is not valid JSON, when it can still be seen (to name it in the warning).
_ID_HINT = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


@dataclass(frozen=True, slots=True)
class Line:
    """One parsed line: its number in the file, its id (as a string) and the whole object."""

    number: int
    id: str
    obj: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """What a file gave: the converted lines in file order, the warnings, the non-blank lines."""

    records: list[T]
    warnings: list[str]
    lines: int


def warning(source: str, number: int, item_id: str | None, problem: str) -> str:
    """The one warning format: ``FILE:LINE (id X): problem; skipped``."""
    id_part = f" (id {item_id})" if item_id is not None else ""
    return f"{source}:{number}{id_part}: {problem}; skipped"


def _hinted_id(line: str) -> str | None:
    hint = _ID_HINT.search(line)
    if hint is None:
        return None
    try:
        return str(json.loads(hint.group(1)))
    except json.JSONDecodeError:
        return None


def _valid_id(raw: Any) -> str | None:
    """A non-empty string or an integer (numeric ids become strings); anything else is no id."""
    if isinstance(raw, bool) or not isinstance(raw, str | int) or raw == "":
        return None
    return str(raw)


def parse(lines: Iterable[bytes | str], source: str, convert: Callable[[Line], T]) -> Read[T]:
    """Convert each non-blank line; a line that fails (``ValueError``/``TypeError`` from
    ``convert`` included) is a warning. A repeated id keeps the first good line."""
    stream = Stream(lines, source, convert)
    records = list(stream)
    return Read(records, stream.warnings, stream.lines)


class Stream(Generic[T]):
    """``parse`` one line at a time: iterating it converts each line as it is read (a
    100,000-line upload is never in memory at once); ``warnings`` and ``lines`` fill in as it
    goes and are complete once it is exhausted. Iterate it once."""

    def __init__(
        self, lines: Iterable[bytes | str], source: str, convert: Callable[[Line], T]
    ) -> None:
        self._lines = lines
        self._source = source
        self._convert = convert
        self.warnings: list[str] = []
        self.lines = 0  # non-blank lines read so far

    def __iter__(self) -> Iterator[T]:
        source, convert, warnings = self._source, self._convert, self.warnings
        first_seen: dict[str, int] = {}
        for number, raw in enumerate(self._lines, start=1):
            try:
                text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError as exc:
                self.lines += 1
                problem = f"not UTF-8 ({exc.reason} at byte {exc.start})"
                warnings.append(warning(source, number, None, problem))
                continue
            text = text.rstrip("\r\n")  # a JSON error's column then counts on this line
            if number == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            self.lines += 1
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                problem = f"invalid JSON ({exc.msg}, column {exc.colno})"
                warnings.append(warning(source, number, _hinted_id(text), problem))
                continue
            if not isinstance(obj, dict):
                problem = f"expected a JSON object, got {type(obj).__name__}"
                warnings.append(warning(source, number, None, problem))
                continue
            item_id = _valid_id(obj.get("id"))
            if item_id is None:
                warnings.append(warning(source, number, None, 'missing or invalid "id"'))
                continue
            if item_id in first_seen:
                problem = f"duplicate id, first seen on line {first_seen[item_id]}"
                warnings.append(warning(source, number, item_id, problem))
                continue
            try:
                record = convert(Line(number, item_id, obj))
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                warnings.append(warning(source, number, item_id, one_line(exc)))
                continue
            first_seen[item_id] = number
            yield record


def read(path: str | Path, convert: Callable[[Line], T]) -> Read[T]:
    """``parse`` over a file (warnings name it by its file name)."""
    with stream(path, convert) as lines:
        records = list(lines)
    return Read(records, lines.warnings, lines.lines)


@contextmanager
def stream(path: str | Path, convert: Callable[[Line], T]) -> Iterator[Stream[T]]:
    """``read`` one line at a time: a ``Stream`` over the open file (closed on exit)."""
    p = Path(path)
    try:
        fh = p.open("rb")
    except FileNotFoundError:
        raise UsageError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, not a file") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror or exc})") from None
    with fh:  # only opening is guarded: an error of the caller's own goes through unchanged
        yield Stream(fh, p.name, convert)
