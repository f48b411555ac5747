"""Files written whole or not at all: a temp file in the same folder, renamed over the target.

An export, a report or a ``score`` report cut short (a full disk, a Ctrl-C, a crash) must
never be left as a truncated file that looks complete. ``atomic_text`` writes to a hidden
temp file next to the target, flushes it to disk, then renames it over the target in one
step (``os.replace``, atomic on POSIX and Windows within one folder). On failure the temp
file is removed and the old file, if any, is left exactly as it was.
"""

from __future__ import annotations

import codecs
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from extraction_eval.errors import UsageError

# Text that cannot be encoded (a lone UTF-16 surrogate) is written as U+FFFD, never an error
# halfway through a file.
_REPLACE = "extraction_eval.replace_with_fffd"


def _fffd(exc: UnicodeError) -> tuple[bytes, int]:
    """U+FFFD as UTF-8 bytes (the UTF-8 encoder takes only ASCII text from a handler)."""
    end = int(getattr(exc, "end", 0))
    return "\ufffd".encode() * (end - int(getattr(exc, "start", end))), end


codecs.register_error(_REPLACE, _fffd)  # type: ignore[arg-type]


class WriteFailed(UsageError):
    """The file could not be written; the old one (if any) is unchanged."""

    def __init__(self, path: Path, problem: str, *, existed: bool) -> None:
        after = "the old file is left as it was" if existed else "no file was written"
        super().__init__(f"{path}: cannot write: {problem}; {after}")
        self.path = path


@contextmanager
def atomic_text(path: Path, *, newline: str | None = None) -> Iterator[TextIO]:
    """A UTF-8 text file handle whose content replaces ``path`` only when the block ends
    without an exception. Raises ``WriteFailed`` (one line, no traceback) on an ``OSError``."""
    path = Path(path)
    existed = path.exists()
    if existed and not path.is_file():  # /dev/stdout, a pipe: cannot be replaced, write through
        try:
            with path.open("w", encoding="utf-8", errors=_REPLACE, newline=newline) as fh:
                yield fh
        except OSError as exc:
            raise WriteFailed(path, exc.strerror or str(exc), existed=existed) from None
        return
    if path.is_symlink():
        path = path.resolve()  # the link's target gets the content; the link stays a link
    mode = (path.stat().st_mode & 0o7777) if existed else None
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # the umask applies
    except OSError as exc:
        raise WriteFailed(path, exc.strerror or str(exc), existed=existed) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=_REPLACE, newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # the target keeps its permissions
        os.replace(tmp, path)
    except BaseException as exc:
        with suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise WriteFailed(path, exc.strerror or str(exc), existed=existed) from None
        raise


def write_text_atomic(path: Path, text: str) -> int:
    """``path`` gets ``text`` whole or not at all; returns the bytes written."""
    with atomic_text(path) as fh:
        fh.write(text)
    return len(text.encode("utf-8", _REPLACE))
