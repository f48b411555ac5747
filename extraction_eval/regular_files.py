"""Reading a small file the user names (a schema, a fake-model script, ``.env``) as hostile
input: only a regular file is read (a FIFO would wait for a writer forever, a device never
ends), opened without blocking and checked on the open descriptor (the file checked is the file
read), and never past its bound."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotReadable", "open_regular", "read_regular"]


class NotReadable(ValueError):
    """One line saying why the file is not read (not found, not a regular file, too large)."""


def open_regular(path: str | os.PathLike[str], limit: int) -> BinaryIO:
    """``path`` opened for reading if it is a regular file of at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise NotReadable(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable(f"{path}: not a regular file")
        if info.st_size > limit:
            raise NotReadable(f"{path}: {info.st_size:,} bytes, over the limit of {limit:,}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (read no further than that, even
    if the file grows while it is read)."""
    with open_regular(Path(path), limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise NotReadable(f"{path}: over the limit of {limit:,} bytes")
    return data
