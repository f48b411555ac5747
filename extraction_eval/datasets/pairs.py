"""Judge pairs files: labelled name pairs, one JSON object a line, for ``judge calibrate``.

``{"a": "IBM", "b": "International Business Machines", "type": "Org", "context": "...",
"same": true}`` (``type`` and ``context`` optional). A bad line is one warning in the line
reader's format and the other lines are used: a missing or non-boolean label, a name that is
not a non-empty string, a context over ``MAX_PAIR_CONTEXT_CHARS``. Control characters in a
name are replaced by spaces (one warning, the pair is kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extraction_eval.datasets.lines import decoded_lines, objects, warning
from extraction_eval.errors import UsageError
from extraction_eval.limits import MAX_PAIR_CONTEXT_CHARS

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """One line of a pairs file; ``line`` is its number, ``raw`` the object as read (the
    per-pair file repeats it with the verdict added)."""

    a: str
    b: str
    same: bool
    type: str | None
    context: str
    line: int
    raw: dict[str, Any]


def _pair(obj: dict[str, Any], number: int) -> tuple[LabelledPair | None, str, bool]:
    """(pair, problem, kept): a kept pair may come with a note (repaired names)."""
    same = obj.get("same")
    if not isinstance(same, bool):
        return None, 'missing or non-boolean label "same"', False
    names: list[str] = []
    repaired = False
    for key in ("a", "b"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            return None, f'missing or empty name "{key}"', False
        clean = _CONTROL.sub(" ", value)
        repaired = repaired or clean != value
        names.append(clean)
    type_ = obj.get("type")
    if type_ is not None and not isinstance(type_, str):
        return None, '"type" must be a string', False
    context = obj.get("context", "")
    if not isinstance(context, str):
        return None, '"context" must be a string', False
    if len(context) > MAX_PAIR_CONTEXT_CHARS:
        return (
            None,
            f"context of {len(context):,} characters, over the limit of {MAX_PAIR_CONTEXT_CHARS:,}",
            False,
        )
    pair = LabelledPair(names[0], names[1], same, type_ or None, context, number, obj)
    return pair, "control characters in a name replaced by spaces; kept" if repaired else "", True


def read_pairs(path: str | Path) -> tuple[list[LabelledPair], list[str]]:
    """The usable pairs of ``path`` and one warning per bad or repaired line. Raises
    ``UsageError`` only when the file cannot be opened."""
    p = Path(path)
    try:
        fh = p.open("rb")
    except FileNotFoundError:
        raise UsageError(f"{p}: file not found") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror or exc})") from None
    pairs: list[LabelledPair] = []
    warnings: list[str] = []
    with fh:
        for number, obj, (problem, hint) in objects(decoded_lines(fh)):
            if obj is None:
                warnings.append(warning(p.name, number, hint, problem))
                continue
            pair, note, kept = _pair(obj, number)
            if pair is None:
                warnings.append(warning(p.name, number, None, note))
                continue
            if note or problem:
                warnings.append(f"{p.name}:{number}: {note or problem}")
            if kept:
                pairs.append(pair)
    return pairs, warnings
