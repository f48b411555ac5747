"""Reading a TOML config file (``matrix --config``, ``gold build --config``) as hostile input:
bounded in size and depth, and every failure one line (never a ``RecursionError`` traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extraction_eval.errors import UsageError
from extraction_eval.limits import MAX_TOML_BYTES, MAX_TOML_DEPTH


class TomlProblem(UsageError):
    """Why a TOML config file cannot be used (the message names no path: the caller adds it)."""


def read_toml(path: Path) -> dict[str, Any]:
    """The file's table, or :class:`TomlProblem` (too large, unreadable, not TOML, too deep)."""
    import tomllib

    try:
        size = path.stat().st_size
        if size > MAX_TOML_BYTES:
            raise TomlProblem(f"is {size:,} bytes; a config file may have {MAX_TOML_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TomlProblem(f"cannot be read: {type(exc).__name__}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlProblem(f"not valid TOML: {exc}") from None
    except RecursionError:
        raise TomlProblem(f"nested deeper than {MAX_TOML_DEPTH} levels") from None
    if _depth(data) > MAX_TOML_DEPTH:
        raise TomlProblem(f"nested deeper than {MAX_TOML_DEPTH} levels")
    return data


def _depth(value: Any) -> int:
    """How deeply tables and arrays nest (iterative: the value may be deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_TOML_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest
