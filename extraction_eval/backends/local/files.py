"""The store's folder and files are private: folder 0700, files 0600.

The store holds datasets, model answers and error bodies; on a shared machine other users
have no business reading them. A folder the tool creates is made 0700 (one that exists is
left as it is: it may be a project folder); the database and its ``-wal``/``-shm``/
``-journal`` files are made 0600, also when an older version created them readable.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600
SIDE_FILES = ("-wal", "-shm", "-journal")


def private_store_files(path: Path) -> None:
    """Create ``path``'s folder (0700) and the empty database file (0600) if absent, and
    narrow the database and its side files to 0600. Raises ``OSError``."""
    folder = path.parent
    if not folder.is_dir():
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        os.chmod(folder, FOLDER_MODE)  # mkdir's mode is cut by the umask; this one is not
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE))
    for file in (path, *(path.with_name(path.name + s) for s in SIDE_FILES)):
        try:
            if file.stat().st_mode & 0o777 != FILE_MODE:
                os.chmod(file, FILE_MODE)
        except FileNotFoundError:
            continue
        except PermissionError:  # not ours (a shared read-only store): reading still works
            continue
