"""Files are written whole or not at all: a failure halfway leaves the old file (or none) and
no temp file, and says so in one line."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from extraction_eval.atomic import WriteFailed, atomic_text, write_text_atomic


def test_a_failure_halfway_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_text("old content\n")
    with pytest.raises(WriteFailed) as info, atomic_text(target) as fh:
        fh.write("half of the new")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(info.value) == (
        f"{target}: cannot write: No space left on device; the old file is left as it was"
    )
    assert target.read_text() == "old content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl"]


def test_a_failure_with_no_old_file_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "new.html"
    with pytest.raises(WriteFailed, match="no file was written"), atomic_text(target) as fh:
        fh.write("<html>")
        raise OSError(errno.EIO, "I/O error")
    assert list(tmp_path.iterdir()) == []


def test_any_exception_in_the_block_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("{}")
    with pytest.raises(KeyboardInterrupt), atomic_text(target) as fh:
        fh.write('{"half": ')
        raise KeyboardInterrupt
    assert target.read_text() == "{}" and len(list(tmp_path.iterdir())) == 1


def test_a_success_replaces_the_file_keeping_its_permissions_and_links(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert write_text_atomic(link, "new ✓\ud800") == len("new ✓\ufffd".encode())
    assert target.read_text(encoding="utf-8") == "new ✓\ufffd"  # a surrogate never stops it
    assert link.is_symlink() and stat.S_IMODE(target.stat().st_mode) == 0o640
