"""PostgreSQL's read-only indexes of lessons and vectors stand aside while an import fills an empty bank.

Each lesson written also goes into five indexes of ``lessons`` that only serve reads (two GIN: its
terms and its tags; three b-trees: by age, by sequence, by kind and age) and each term vector into one
of ``lesson_vectors`` (its changes by sequence). An import into an empty bank drops them first and
builds them once at the end, from the full tables, instead of growing each a row at a time (a GIN
index above all: a fifth of the server's time per lesson, bench/import_speed.py).

Invariants (as ``sqlite_bulk``'s):

- The indexes are dropped only while ``lessons`` is empty (checked under the table's lock, in the
  transaction that drops them), and always built again with the statements the migrations wrote
  (:data:`DEFERRED`): when the import ends, fails or is interrupted, and, should the process die
  first, when the bank is next opened (:func:`restore`, called by the dialect's migration step).
- Dropping holds the schema's advisory lock, building holds it shared and one per index (checked
  missing again under it), so two processes importing into the same empty bank never build an index
  twice. An import builds them on two connections at once, the terms' GIN (the longest, ~2 s at 100k
  lessons) beside the others: the rest of the import is done, and one core would wait. Reads
  meanwhile give the same answers, found without them.
- The keys (primary keys, ``(namespace, content_hash)``) are never dropped: they decide what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager

from lessonbank.stores.sql.dialect import Connection

# Name → the statement that made it (migrations 1, 2 and 6), in the order they are built.
DEFERRED: dict[str, str] = {
    "lessons_terms": "CREATE INDEX IF NOT EXISTS lessons_terms ON lessons USING gin (terms)",
    "lessons_tags": "CREATE INDEX IF NOT EXISTS lessons_tags ON lessons USING gin (tags)",
    "lessons_ns_created": "CREATE INDEX IF NOT EXISTS lessons_ns_created ON lessons (namespace, created_at)",
    "lessons_ns_seq": "CREATE INDEX IF NOT EXISTS lessons_ns_seq ON lessons (namespace, seq)",
    "lessons_ns_kind_created": (
        "CREATE INDEX IF NOT EXISTS lessons_ns_kind_created ON lessons (namespace, kind, created_at)"
    ),
    "lesson_vectors_changes": (
        "CREATE INDEX IF NOT EXISTS lesson_vectors_changes ON lesson_vectors (namespace, model, seq)"
    ),
}


def _lock(conn: Connection, index: str = "", *, shared: bool = False) -> None:
    """The schema's bulk-index lock (``shared``: builders of different indexes hold it together), or
    ``index``'s build lock, to the end of the caller's transaction."""
    call = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(
        f"SELECT {call}(hashtext('lessonbank:bulk-indexes:' || current_schema() || ?))",
        (f":{index}" if index else "",),
    )


def _table(name: str) -> str:
    """The table a deferred index is on (as its statement names it)."""
    return DEFERRED[name].split(" ON ", 1)[1].split()[0]


def missing(conn: Connection) -> list[str]:
    """The deferred indexes the bank lacks, in :data:`DEFERRED`'s order; only those whose table the
    schema has (a schema an older release wrote may not have every table yet). One catalog read:
    every open runs it."""
    rows = conn.execute(
        "SELECT 'index', indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ANY(?) "
        "UNION ALL "
        "SELECT 'table', tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY(?)",
        (list(DEFERRED), sorted({_table(name) for name in DEFERRED})),
    ).fetchall()
    present = {name for kind, name in rows if kind == "index"}
    tables = {name for kind, name in rows if kind == "table"}
    return [name for name in DEFERRED if name not in present and _table(name) in tables]


def restore(conn: Connection, names: Sequence[str] | None = None) -> None:
    """Build the deferred indexes the bank lacks (or those of ``names`` it lacks) inside the caller's
    transaction, each under its own lock."""
    names = missing(conn) if names is None else names
    if names:
        _lock(conn, shared=True)  # not while a drop (or an older release's build) holds the schema's
    for name in names:
        _lock(conn, name)
        if name in missing(conn):  # again, under its lock: another process may have built it meanwhile
            conn.execute(DEFERRED[name])


def rebuild(tx: Callable[[], AbstractContextManager[Connection]]) -> None:
    """Build the deferred indexes the bank lacks, the first (the terms' GIN) in a transaction of its
    own on another thread while this one builds the rest: ``tx`` opens a transaction on a
    connection of its own each time."""
    with tx() as conn:
        names = missing(conn)
    if len(names) < 2:
        if names:
            with tx() as conn:
                restore(conn, names)
        return

    def first() -> None:
        with tx() as conn:
            restore(conn, names[:1])

    with ThreadPoolExecutor(1, thread_name_prefix="lessonbank-index") as pool:
        building = pool.submit(first)
        try:
            with tx() as conn:
                restore(conn, names[1:])
        finally:
            building.result()


@contextmanager
def deferred_indexes(tx: Callable[[], AbstractContextManager[Connection]]) -> Iterator[bool]:
    """Drop the deferred indexes when ``lessons`` is empty, and build them again on the way out;
    yields whether they were dropped. ``tx`` opens a transaction."""
    with tx() as conn:
        _lock(conn)
        # The table's lock first (a writer waits for the drop, or the drop for the writer's commit),
        # then the emptiness seen under it stays true until the indexes are gone.
        conn.execute("LOCK TABLE lessons IN SHARE ROW EXCLUSIVE MODE")
        empty = bool(conn.execute("SELECT NOT EXISTS (SELECT 1 FROM lessons)").fetchone()[0])
        if empty:
            for name in DEFERRED:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
    try:
        yield empty
    finally:
        if empty:
            rebuild(tx)
