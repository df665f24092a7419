"""Where an SQLite bank lives on disk: its folder made, and how a file this process may not write is opened.

A bank file (and so its ``-wal`` and ``-shm`` files, which SQLite creates with the bank file's mode)
is created readable by its owner only (0600), in folders created private (0700): it holds lessons
and the episodes they came from. A file or folder that already exists keeps its mode."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lessonbank.errors import StoreError
from lessonbank.settings import make_private_folder

FILE_MODE = 0o600


def open_target(path: str) -> tuple[str, bool]:
    """The URI to connect to and whether the bank is read-only for this process.

    The folder and the file are created when missing, private to this user. A file this process
    may not write (a read-only file, folder or filesystem) is opened to read, so commands that only
    read still work; with no ``-wal`` file beside it in a folder nobody can write, no process can be
    writing, and the file is read as it is (``immutable``), which needs no lock and no shared-memory
    file.
    """
    file = Path(path).expanduser()
    try:
        make_private_folder(file.parent)
    except OSError as exc:
        raise StoreError(f"cannot create the folder {file.parent} for {path}: {exc.strerror or exc}") from exc
    _create_private(file)
    if not file.is_file() or (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK)):
        return f"{file.resolve().as_uri()}", False
    frozen = not os.access(file.parent, os.W_OK) and not Path(f"{path}-wal").exists()
    return f"{file.resolve().as_uri()}?{'immutable=1' if frozen else 'mode=ro'}", True


def _create_private(file: Path) -> None:
    """Create ``file`` empty with mode 0600 when it does not exist (SQLite would make it 0644 less the
    umask; an empty file is a valid new database). A failure is left to SQLite to report."""
    # It exists (or a link is there), or the folder is read-only: SQLite opens it or says what is wrong.
    with contextlib.suppress(OSError):
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE))
