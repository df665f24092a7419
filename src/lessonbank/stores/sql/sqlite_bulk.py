"""SQLite's secondary indexes of ``lessons`` stand aside while an import fills an empty bank.

Each lesson written into ``lessons`` also goes into three indexes that only serve reads (by kind and
status, by age, by kind and age). An import into an empty bank drops them first and builds them once
at the end, from the table in one sorted pass, instead of growing each a row at a time (about a tenth
of SQLite's import time per lesson, bench/import_speed.py).

Invariants: the indexes are dropped only while ``lessons`` is empty, and always built again, with
the statements the migrations wrote (:data:`DEFERRED`): when the import ends, fails or is
interrupted, and, should the process die first, when the bank is next opened (:func:`restore`).
Reads meanwhile give the same answers, found without these indexes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

# Name → the statement that made it, as sqlite_master holds it (migrations 1 and 8).
DEFERRED: dict[str, str] = {
    "lessons_ns_kind": "CREATE INDEX lessons_ns_kind ON lessons (namespace, kind, status)",
    "lessons_ns_created": "CREATE INDEX lessons_ns_created ON lessons (namespace, created_at)",
    "lessons_ns_kind_created": "CREATE INDEX lessons_ns_kind_created ON lessons (namespace, kind, created_at)",
}


def missing(conn: sqlite3.Connection) -> list[str]:
    """The deferred indexes the bank lacks, in :data:`DEFERRED`'s order."""
    present = {
        row[0]
        for row in conn.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ({', '.join('?' * len(DEFERRED))})",
            tuple(DEFERRED),
        )
    }
    return [name for name in DEFERRED if name not in present]


def restore(conn: sqlite3.Connection) -> None:
    """Build the deferred indexes the bank lacks (inside the caller's write transaction)."""
    for name in missing(conn):
        conn.execute(DEFERRED[name])


@contextmanager
def deferred_indexes(tx: Callable[[], AbstractContextManager[sqlite3.Connection]]) -> Iterator[bool]:
    """Drop the deferred indexes when ``lessons`` is empty, and build them again on the way out;
    yields whether they were dropped. ``tx`` opens a write transaction."""
    with tx() as conn:
        empty = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM lessons)").fetchone()[0] == 1
        if empty:
            for name in DEFERRED:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
    try:
        yield empty
    finally:
        if empty:
            with tx() as conn:
                restore(conn)
