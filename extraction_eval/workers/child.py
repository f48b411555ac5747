"""What the parent side of every worker process does the same way (the report's and the
run's items'): start a fresh interpreter with pipes, keep its stderr aside, and say in one
line why it failed. One copy, so a process that cannot start leaks no file and a failure
line never carries a secret, whichever worker it was.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from typing import IO


def start_python(code: str) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """``code`` in an isolated interpreter (``-I``: no current directory, user site or
    ``PYTHON*`` variables on its path; the code sets ``sys.path`` from its first pickle),
    stdin and stdout piped, stderr kept in a temporary file for :func:`last_error_line`."""
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it after reading
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    except BaseException:
        errors.close()
        raise
    return proc, errors


def last_error_line(errors: IO[bytes]) -> str | None:
    """The last line the process wrote to stderr (its exception), cut to 300 characters and
    redacted (it becomes a warning or a log line: a traceback may quote a key); None when
    it wrote nothing."""
    from extraction_eval.redact import redact

    try:
        errors.seek(0)
        tail = errors.read()[-4096:].decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return redact(lines[-1])[:300] if lines else None
