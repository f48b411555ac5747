"""An alias table (``--aliases FILE``): groups of names of one real-world entity, for gold that
carries no mention lists ("IBM" = "International Business Machines").

Two spellings, told by the file's first non-blank character:

- JSON: a list of groups, each a list of names: ``[["IBM", "International Business
  Machines"], ["NYC", "New York City", "New York"]]``;
- CSV or TSV (by extension ``.tsv``, else by a tab in the first line): one group a line,
  one name a cell.

A bad group (not a list of strings, a name over ``MAX_ALIAS_NAME_CHARS``, more than
``MAX_SURFACE_FORMS`` names, a line over ``MAX_ALIAS_LINE_BYTES``) is one warning naming its
line (or its position in the JSON list) and is skipped; the rest of the table is used. Groups
sharing a name are merged (``merge_alias_groups``): a chain or a cycle is one group.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from extraction_eval.errors import InvalidValue, one_line
from extraction_eval.limits import MAX_SURFACE_FORMS
from extraction_eval.regular_files import NotReadable, read_regular

__all__ = [
    "MAX_ALIAS_FILE_BYTES",
    "MAX_ALIAS_LINE_BYTES",
    "MAX_ALIAS_NAME_CHARS",
    "AliasTable",
    "read_alias_table",
]

# The whole file is read at once (groups are merged across it): its size is its memory.
MAX_ALIAS_FILE_BYTES = 32_000_000
# One group a line: a longer line is a mistake (a file without line breaks, a binary).
MAX_ALIAS_LINE_BYTES = 65_536
# A name longer than this is no entity's name.
MAX_ALIAS_NAME_CHARS = 1_000


class AliasTable:
    """The groups read from a file and one warning per group skipped."""

    def __init__(self, groups: list[list[str]], warnings: list[str]) -> None:
        self.groups = groups
        self.warnings = warnings


def _check_group(names: object, where: str) -> tuple[list[str] | None, str | None]:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None, f"{where}: a group is a list of names (strings)"
    cleaned = [n.strip() for n in names if n.strip()]
    if len(cleaned) > MAX_SURFACE_FORMS:
        return None, (
            f"{where}: {len(cleaned):,} names in one group, over the limit of {MAX_SURFACE_FORMS:,}"
        )
    long = next((n for n in cleaned if len(n) > MAX_ALIAS_NAME_CHARS), None)
    if long is not None:
        return None, f"{where}: a name of {len(long):,} characters (limit {MAX_ALIAS_NAME_CHARS:,})"
    if any("\x00" in n for n in cleaned):
        return None, f"{where}: a name holds a NUL character"
    if len(cleaned) < 2:
        return None, f"{where}: a group needs two names or more"
    return cleaned, None


def _json_groups(text: str, path: Path) -> AliasTable:
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidValue("aliases", f"{path}: not valid JSON ({one_line(exc)})") from None
    if not isinstance(raw, list):
        raise InvalidValue("aliases", f"{path}: a JSON alias table is a list of groups")
    groups: list[list[str]] = []
    warnings: list[str] = []
    for i, names in enumerate(raw, 1):
        group, problem = _check_group(names, f"{path}: group {i}")
        if group is not None:
            groups.append(group)
        elif problem is not None:
            warnings.append(problem)
    return AliasTable(groups, warnings)


def _delimited_groups(text: str, path: Path, delimiter: str) -> AliasTable:
    groups: list[list[str]] = []
    warnings: list[str] = []
    for number, line in enumerate(io.StringIO(text, newline=""), 1):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        if len(line.encode("utf-8", "surrogatepass")) > MAX_ALIAS_LINE_BYTES:
            warnings.append(f"{where}: a line over {MAX_ALIAS_LINE_BYTES:,} bytes")
            continue
        try:
            cells = next(csv.reader([line], delimiter=delimiter))
        except csv.Error as exc:
            warnings.append(f"{where}: {one_line(exc)}")
            continue
        group, problem = _check_group(cells, where)
        if group is not None:
            groups.append(group)
        elif problem is not None:
            warnings.append(problem)
    return AliasTable(groups, warnings)


def read_alias_table(path: str | Path) -> AliasTable:
    """The table in ``path``. A file that cannot be read, is over ``MAX_ALIAS_FILE_BYTES``, is
    not UTF-8 or is not a table at all is an ``InvalidValue`` on ``aliases`` (one line)."""
    path = Path(path)
    try:
        text = read_regular(path, MAX_ALIAS_FILE_BYTES).decode("utf-8-sig")
    except NotReadable as exc:
        raise InvalidValue("aliases", str(exc)) from None
    except UnicodeDecodeError as exc:
        raise InvalidValue("aliases", f"{path}: {one_line(exc)}") from None
    head = text.lstrip()[:1]
    if head == "[":
        return _json_groups(text, path)
    first_line = text.split("\n", 1)[0]
    delimiter = "\t" if path.suffix.lower() == ".tsv" or "\t" in first_line else ","
    return _delimited_groups(text, path, delimiter)
