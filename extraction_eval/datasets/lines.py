"""The one JSONL line reader behind gold files, prediction files and dataset uploads.

Every file this package reads is one JSON object a line, keyed by ``"id"``. A bad line never
stops the file: it becomes one warning in one format, ``FILE:LINE (id X): problem; skipped``
(the id part only when the id could be read), so ``score`` and ``datasets upload`` word the
same bad line the same way. Only a file that cannot be opened at all raises ``UsageError``.

The same rules hold for every reader of records, through the functions here: a line is at
most ``MAX_LINE_BYTES`` and UTF-8 without NUL (``decode_line``), a JSON record an object at
most ``MAX_DEPTH`` deep without an escaped NUL, lone surrogates repaired (``vetted``), and a
dataset item has no NUL in its text and at most ``DEFAULT_MAX_OBJECTS`` objects of a kind
(``check_record``): our JSONL, the importers and the Batch API's output files.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

from extraction_eval.errors import UsageError, one_line
from extraction_eval.limits import DEFAULT_MAX_OBJECTS, MAX_LINE_BYTES
from extraction_eval.textsafe import clean_json_value, may_hold_surrogates
from extraction_eval.types import Extraction

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
    except ValueError:  # bad JSON, or an integer past Python's digit limit (4,300)
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
    goes and are complete once it is exhausted. Iterate it once.

    ``warnings`` also holds lines that were kept after a repair (lone UTF-16 surrogates
    replaced with U+FFFD); ``skipped`` counts only the lines left out."""

    def __init__(
        self, lines: Iterable[bytes | str], source: str, convert: Callable[[Line], T]
    ) -> None:
        self._lines = lines
        self._source = source
        self._convert = convert
        self.warnings: list[str] = []
        self.lines = 0  # non-blank lines read so far
        self.skipped = 0

    def _skip(self, number: int, item_id: str | None, problem: str) -> None:
        self.skipped += 1
        self.warnings.append(warning(self._source, number, item_id, problem))

    def __iter__(self) -> Iterator[T]:
        source, convert = self._source, self._convert
        first_seen: dict[str, int] = {}
        for number, obj, problem in objects(self._lines, self):
            if obj is None:
                self._skip(number, problem[1], problem[0])
                continue
            item_id = _valid_id(obj.get("id"))
            if item_id is None:
                self._skip(number, None, 'missing or invalid "id"')
                continue
            if item_id in first_seen:
                self._skip(
                    number, item_id, f"duplicate id, first seen on line {first_seen[item_id]}"
                )
                continue
            try:
                record = convert(Line(number, item_id, obj))
            except (ValueError, TypeError, RecursionError) as exc:  # pydantic's too
                self._skip(number, item_id, one_line(exc))
                continue
            if problem[0]:  # kept, repaired
                self.warnings.append(f"{source}:{number} (id {item_id}): {problem[0]}")
            first_seen[item_id] = number
            yield record


# Nesting deeper than this is refused: our lines nest 4 levels; a deeper one is hostile, and
# code further on (the store's JSON, pydantic) must never meet Python's recursion limit.
MAX_DEPTH = 64
_REPAIRED = "lone UTF-16 surrogates replaced with U+FFFD; kept"


def objects(
    lines: Iterable[bytes | str], counter: Stream[Any] | None = None
) -> Iterator[tuple[int, dict[str, Any] | None, tuple[str, str | None]]]:
    """(line number, object, (problem, id hint)) per non-blank line: the object is None when
    the line is skipped (the problem says why); a kept line may carry a note (a repair).

    Never raises for a line's content: bad bytes, bad JSON, NUL, deep nesting, huge numbers,
    lone surrogates are each that line's problem. ``counter.lines`` counts the lines read."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, OverlongText):
            raw = Overlong()  # the same problem, said once (decode_line)
        if isinstance(raw, bytes):
            if b"\x00" in raw and not raw.strip(b"\x00\r\n"):
                continue  # a line of NULs only: blank
            decoded, problem = decode_line(raw)
            if decoded is None:
                if counter is not None:
                    counter.lines += 1
                hint = _hinted_id(raw.decode("utf-8", "replace")) if b"\x00" in raw else None
                yield number, None, (problem, hint)
                continue
            text = decoded
        else:
            text = raw
        text = text.rstrip("\r\n")  # a JSON error's column then counts on this line
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        if counter is not None:
            counter.lines += 1
        obj, problem = load_object(text)
        yield number, obj, (problem, _hinted_id(text) if obj is None else None)


_NUL_BYTES = "contains NUL bytes (UTF-16 text? the file must be UTF-8)"


class Overlong(bytes):
    """Stands for a line longer than ``MAX_LINE_BYTES`` (empty: the line was dropped)."""


class OverlongText(str):
    """``Overlong`` for a file read as text (UTF-16)."""


_OVERLONG = f"longer than {MAX_LINE_BYTES:,} bytes"


def decode_line(raw: bytes) -> tuple[str | None, str]:
    """One line of a file as text, or None and the problem (too long, NUL bytes, not UTF-8):
    the rule every reader applies to a line, so one bad line costs only itself (its record)."""
    if isinstance(raw, Overlong):
        return None, _OVERLONG
    if b"\x00" in raw:
        return None, _NUL_BYTES
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 ({exc.reason} at byte {exc.start})"


def load_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """One line's JSON object, or None and the problem; a kept object may come with a note."""
    if "\x00" in text:
        return None, _NUL_BYTES
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg}, column {exc.colno})"
    except RecursionError:
        return None, f"nested more than {MAX_DEPTH} levels deep"
    except ValueError as exc:  # a number past Python's digit limit for int conversion
        digits = "number too long" if "digits" in str(exc) else one_line(exc)
        return None, f"invalid JSON ({digits})"
    return vetted(text, obj)


def vetted(text: str, obj: Any) -> tuple[dict[str, Any] | None, str]:
    """The checks on a decoded JSON object (``text`` is its JSON): not an object, deeper than
    ``MAX_DEPTH``, a NUL character are refused; lone surrogates are repaired, with a note.
    Every reader of JSON records (our lines, doccano's, Label Studio's tasks) applies these."""
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    if _too_deep(text, obj):
        return None, f"nested more than {MAX_DEPTH} levels deep"
    if "\\u0000" in text and "\\u0000" in json.dumps(obj, ensure_ascii=False):
        return None, "contains a NUL character (\\u0000)"
    if may_hold_surrogates(text):
        obj, changed = clean_json_value(obj)
        if changed:
            return obj, _REPAIRED
    return obj, ""


def over_cap(extraction: Extraction, limit: int) -> str | None:
    """What exceeds ``limit`` in ``extraction`` ("12,000 entities"), or None."""
    for kind, objects in (
        ("entities", extraction.entities),
        ("relationships", extraction.relationships),
    ):
        if len(objects) > limit:
            return f"{len(objects):,} {kind}"
    return None


def check_record(text: str, extraction: Extraction) -> None:
    """The rules on a record every dataset reader applies (our JSONL upload and each
    importer): no NUL in its text, at most ``DEFAULT_MAX_OBJECTS`` entities and as many
    relationships (a run would refuse the item anyway; matching is quadratic in the count).
    Raises ``ValueError``: the record's problem."""
    if "\x00" in text:
        raise ValueError("the text contains a NUL character")
    found = over_cap(extraction, DEFAULT_MAX_OBJECTS)
    if found is not None:
        raise ValueError(
            f"{found}, over the limit of {DEFAULT_MAX_OBJECTS:,} per item (max_objects)"
        )


def _too_deep(text: str, obj: Any) -> bool:
    """Whether ``obj`` nests deeper than ``MAX_DEPTH``; the usual line has too few brackets
    to be, so it is never walked."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    level: list[Any] = [obj]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return False
    return True


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
        yield Stream(decoded_lines(fh), p.name, convert)


def decoded_lines(fh: BinaryIO) -> Iterable[bytes | str]:
    """The file's lines: bytes (decoded line by line, so one bad line costs only itself), or
    text when the file starts with a UTF-16 byte order mark (its lines are read as UTF-16;
    a bad sequence becomes U+FFFD, which the line's JSON then shows)."""
    head = fh.peek(2)[:2] if hasattr(fh, "peek") else b""
    if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        text = io.TextIOWrapper(fh, "utf-16", "replace")
        return (line.removeprefix("\ufeff") for line in _bounded_text(text))
    return bounded_lines(fh)


def bounded_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each at most ``MAX_LINE_BYTES``: a longer one is read in pieces and
    dropped, and an ``Overlong`` stands in its place (its number still counts)."""
    while line := fh.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield Overlong()
            continue
        yield line


def _bounded_text(fh: io.TextIOWrapper) -> Iterator[str]:
    """``bounded_lines`` for a file read as text (its bound in characters)."""
    while line := fh.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith("\n"):
                pass
            yield OverlongText()
            continue
        yield line
