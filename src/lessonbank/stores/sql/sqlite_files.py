"""Where an SQLite bank lives on disk: its folder made, and how a file this process may not write is opened."""

from __future__ import annotations

import os
from pathlib import Path

from lessonbank.errors import StoreError


def open_target(path: str) -> tuple[str, bool]:
    """The URI to connect to and whether the bank is read-only for this process.

    The folder is created when missing. A file this process may not write (a read-only file,
    folder or filesystem) is opened to read, so commands that only read still work; with no
    ``-wal`` file beside it in a folder nobody can write, no process can be writing, and the
    file is read as it is (``immutable``), which needs no lock and no shared-memory file.
    """
    file = Path(path).expanduser()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder {file.parent} for {path}: {exc.strerror or exc}") from exc
    if not file.is_file() or (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK)):
        return f"{file.resolve().as_uri()}", False
    frozen = not os.access(file.parent, os.W_OK) and not Path(f"{path}-wal").exists()
    return f"{file.resolve().as_uri()}?{'immutable=1' if frozen else 'mode=ro'}", True
