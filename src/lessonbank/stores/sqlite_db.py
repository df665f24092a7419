"""SQLite plumbing shared by the SQLite store: connections, transactions, migrations.

Invariants:

- WAL mode with ``synchronous=NORMAL``: a committed write survives a crash of any process
  (not a power cut of the machine); readers never block writers.
- Every write is one ``BEGIN IMMEDIATE`` transaction, so two processes serialise on the
  write lock instead of failing on a lock upgrade; ``busy_timeout`` makes them wait.
- Each thread gets its own connection; times are stored as Unix seconds (UTC).
- No caller's commit runs a WAL checkpoint (which copies pages back and syncs, for
  milliseconds): connections turn auto-checkpointing off and a background thread of the
  store checkpoints once the WAL passes ``CHECKPOINT_WAL_BYTES``.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lessonbank.errors import StoreError
from lessonbank.stores.sqlite_schema import MIGRATIONS

Clock = Callable[[], float]

CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024  # SQLite's own auto-checkpoint point: 1000 pages of 4 KiB
CHECKPOINT_POLL_S = 0.5


class SQLiteDatabase:
    """One SQLite file. ``path`` is a file path, or ``":memory:"`` for a throwaway database.

    A throwaway database is a file in a temporary folder, removed on close: an SQLite
    in-memory database lives in one connection, and the bank needs one per thread.
    """

    def __init__(self, path: str | Path, *, clock: Clock = time.time, busy_timeout_s: float = 30.0) -> None:
        self._scratch: str | None = None
        if str(path) == ":memory:":
            self._scratch = tempfile.mkdtemp(prefix="lessonbank-")
            path = Path(self._scratch) / "lessons.db"
        self.path = str(path)
        self.clock = clock
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._stop_checkpoints = threading.Event()
        self._checkpointer: threading.Thread | None = None
        Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._migrate()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="lessonbank-checkpoint", daemon=True
        )
        self._checkpointer.start()

    def _checkpoint_loop(self) -> None:
        wal = Path(self.path + "-wal")
        while not self._stop_checkpoints.wait(CHECKPOINT_POLL_S):
            try:
                if wal.exists() and wal.stat().st_size > CHECKPOINT_WAL_BYTES:
                    self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)")
            except (OSError, sqlite3.Error, StoreError):
                continue  # a busy or closing database: try again at the next tick

    # ----------------------------------------------------------------- connections

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path}: {exc}") from exc
        if mode != "wal":
            raise StoreError(f"{self.path}: could not switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA temp_store = MEMORY")
        with self._lock:
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front, rolls back on any error."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"{self.path}: could not start a write ({exc}); another process holds the lock for too long"
            ) from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self._tx() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} was written by a newer lessonbank (schema {version}, "
                    f"this version knows {len(MIGRATIONS)}); upgrade lessonbank"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in _split_sql(MIGRATIONS[number]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")

    def close(self) -> None:
        self._stop_checkpoints.set()
        if self._checkpointer is not None and self._checkpointer is not threading.current_thread():
            self._checkpointer.join(timeout=30)
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (which hold ``;``) whole."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current))
    return statements
