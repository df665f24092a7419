"""The SQLite dialect: one file, no server, safe for several processes at once.

Invariants:

- WAL mode with ``synchronous=NORMAL``: a committed write survives a crash of any process
  (not a power cut of the machine); readers never block writers.
- Every write is one ``BEGIN IMMEDIATE`` transaction, so two processes serialise on the
  write lock instead of failing on a lock upgrade; ``busy_timeout`` makes them wait. Holding
  that lock is what makes a write's reads safe (no row locks are needed).
- Each thread gets its own connection; times are stored as Unix seconds (UTC).
- No caller's commit runs a WAL checkpoint (which copies pages back and syncs, for
  milliseconds): connections turn auto-checkpointing off and a background thread
  checkpoints once the WAL passes ``CHECKPOINT_WAL_BYTES``.
- ``lessons_fts`` (FTS5, porter stemming over content, tags and ``learned_from``; ranked per
  namespace by :mod:`.sqlite_search`), ``lexical_stats``, ``lesson_tags`` and ``lesson_vectors``
  follow the ``lessons`` table through triggers, so they never disagree with it. The triggers call
  ``lb_doc_len``, a function every connection of this store registers.
- Vectors are plain BLOBs scanned by the caller's in-process index (no extension to load):
  ``lesson_vectors.seq`` (AUTOINCREMENT) orders their writes; SQLite serialises writers, so
  sequence numbers are committed in order.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from lessonbank.errors import StoreError
from lessonbank.lessons import CONFIDENCE_STEP
from lessonbank.models import MAX_TAGS, Decision, Episode, Lesson, VerificationResult, from_timestamp
from lessonbank.ports import VectorChanges
from lessonbank.stores.lexical import LEXICAL_SPACE, lesson_term_vector
from lessonbank.stores.sql import sqlite_bulk
from lessonbank.stores.sql.dialect import VECTORS_COMPLETE, Connection, question_marks
from lessonbank.stores.sql.migrations.sqlite import MIGRATIONS
from lessonbank.stores.sql.sqlite_files import open_target
from lessonbank.stores.sql.sqlite_search import FtsSearch, register_functions

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024  # SQLite's own auto-checkpoint point: 1000 pages of 4 KiB
CHECKPOINT_POLL_S = 0.5

LESSON_COLUMNS = (
    "id, namespace, kind, content, content_hash, tags, task_type, agent, goal_id, trigger, importance, "
    "confidence, source, status, access_count, last_accessed, helpful, harmful, pinned, expires_at, "
    "supersedes, superseded_by, episode_id, reflection_id, created_at, updated_at, extra, learned_from"
)
_NAMES = [column.strip() for column in LESSON_COLUMNS.split(",")]
_EXTRA_FIELDS = ("situation", "mistake", "correction")
# Insert a lesson, or reinforce the one with the same content as LessonWriter.reinforced does: one
# more use, a little more confidence, the union of both tag lists (stored order first, capped).
_UPSERT = (
    f"INSERT INTO lessons ({LESSON_COLUMNS}) VALUES ({question_marks(len(_NAMES))}) "
    "ON CONFLICT (namespace, content_hash) DO UPDATE SET access_count = access_count + 1, "
    "confidence = min(1.0, confidence + ?), last_accessed = ?, updated_at = ?, tags = ("
    "SELECT json_group_array(value) FROM (SELECT value FROM json_each(lessons.tags) UNION ALL "
    "SELECT value FROM json_each(excluded.tags) WHERE value NOT IN (SELECT value FROM json_each(lessons.tags)) "
    f"LIMIT {MAX_TAGS}))"
)


_IMPORTED_VECTOR = "lb_imported_vector"  # a bulk import's term vectors, by namespace and content hash


class ImportRows(NamedTuple):
    """A bulk write made ready (:func:`import_rows`): each first copy's row, the
    repeats inside the batch, and the first copies' term vectors by (namespace, content hash)."""

    rows: list[tuple[Any, ...]]
    repeats: list[tuple[Any, ...]]
    vectors: dict[tuple[str, str], bytes]


def import_rows(lessons: Sequence[Lesson]) -> ImportRows:
    """The rows of a bulk write and the new lessons' term vectors (computed here once, not by a call
    back into Python per row), made before its transaction, so the write lock is then held for
    SQLite's own work only. Pure and picklable both ways: an import's worker process runs it."""
    rows: list[tuple[Any, ...]] = []
    repeats: list[tuple[Any, ...]] = []
    vectors: dict[tuple[str, str], bytes] = {}
    for lesson in lessons:
        row = (*_params(lesson), CONFIDENCE_STEP)
        key = (lesson.namespace, lesson.content_hash)
        # A repeat inside the batch must wait until its first copy is indexed: reinforcing a row
        # the index has not seen would hand FTS5 a delete for a row it does not hold.
        if key in vectors:
            repeats.append(row)
        else:
            rows.append(row)
            vectors[key] = lesson_term_vector(lesson)
    return ImportRows(rows, repeats, vectors)


class SQLiteDialect:
    """One SQLite file. ``path`` is a file path, or ``":memory:"`` for a throwaway database.

    A throwaway database is a file in a temporary folder, removed on close: an SQLite
    in-memory database lives in one connection, and the store needs one per thread.
    """

    for_update = ""
    skip_locked = ""
    greatest = "max"
    integrity_errors: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,)
    episode_columns: tuple[str, ...] = (
        "id", "namespace", "created_at", "status", "task", "task_type", "agent", "goal_id", "loop_id", "data",
        "decision",
    )  # fmt: skip
    reflection_columns: tuple[str, ...] = (
        "id", "namespace", "episode_id", "job_id", "reflector", "trigger", "status", "model", "tokens_in",
        "tokens_out", "cost_usd", "created_at", "data",
    )  # fmt: skip
    lesson_columns = ", ".join(f"l.{name}" for name in _NAMES)
    llm_calls = "json_extract(data, '$.llm_calls')"
    utc_day = "date(created_at, 'unixepoch')"

    def __init__(
        self, path: str | Path, *, clock: Callable[[], float] = time.time, busy_timeout_s: float = 30.0
    ) -> None:
        self._scratch: str | None = None
        if str(path) == ":memory:":
            self._scratch = tempfile.mkdtemp(prefix="lessonbank-")
            path = Path(self._scratch) / "lessons.db"
        self.path = str(path)
        # The lexical index's snapshots, one file per namespace (lessonbank.retrieval.snapshot).
        self.index_folder = Path(f"{self.path}.lexicon")
        self.clock = clock
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # This process's writers queue here, in turn, instead of each polling SQLite's file lock with
        # busy_timeout's growing sleeps (which gave 50 concurrent writers a 2.4 s p99 under serve).
        self._writing = threading.Lock()
        self._closed = False
        self.lexical = FtsSearch(self)
        self._stop_checkpoints = threading.Event()
        self._checkpointer: threading.Thread | None = None
        self._uri, self.read_only = open_target(self.path)
        self._migrate()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="lessonbank-checkpoint", daemon=True
        )
        self._checkpointer.start()

    # ----------------------------------------------------------------- connections

    def connection(self) -> sqlite3.Connection:
        """This thread's connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        try:
            timeout = self._busy_ms / 1000
            conn = sqlite3.connect(
                self._uri, isolation_level=None, check_same_thread=False, timeout=timeout, uri=True
            )
            conn.row_factory = sqlite3.Row
            register_functions(conn)
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            mode = "wal" if self.read_only else conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
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
    def read(self) -> Iterator[sqlite3.Connection]:
        yield self.connection()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front, rolls back on any error."""
        if self.read_only:
            raise StoreError(f"{self.path} is read-only for this process: it cannot be written")
        conn = self.connection()
        if not self._writing.acquire(timeout=self._busy_ms / 1000):
            raise StoreError(f"{self.path}: could not start a write; another thread held it for too long")
        try:
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
        finally:
            self._writing.release()

    @staticmethod
    def run(fn: Callable[[], T]) -> T:
        return fn()

    def _migrate(self) -> None:
        # An up-to-date file is only read here: opening a bank never waits behind another writer.
        conn = self.connection()
        if conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS):
            if not self.read_only and sqlite_bulk.missing(conn):  # an import died with them dropped
                with self.tx() as conn:
                    sqlite_bulk.restore(conn)
            return
        with self.tx() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} was written by a newer lessonbank (schema {version}, "
                    f"this version knows {len(MIGRATIONS)}); upgrade lessonbank"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in split_sql(MIGRATIONS[number]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")
            sqlite_bulk.restore(conn)

    def _checkpoint_loop(self) -> None:
        wal = Path(self.path + "-wal")
        while not self._stop_checkpoints.wait(CHECKPOINT_POLL_S):
            try:
                if wal.exists() and wal.stat().st_size > CHECKPOINT_WAL_BYTES:
                    self.connection().execute("PRAGMA wal_checkpoint(PASSIVE)")
            except (OSError, sqlite3.Error, StoreError):
                continue  # a busy or closing database: try again at the next tick

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

    def size_bytes(self, conn: Connection) -> int | None:
        files = (Path(self.path + suffix) for suffix in ("", "-wal"))
        return sum(file.stat().st_size for file in files if file.exists())

    @staticmethod
    def notify(conn: Connection, namespace: str) -> None:
        """Workers poll SQLite: nothing to announce."""

    # ----------------------------------------------------------------- encoding

    @staticmethod
    def in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({question_marks(len(values))})", list(values)

    @staticmethod
    def json(value: Any) -> str:
        return json.dumps(value)

    @staticmethod
    def load_json(value: str) -> Any:
        return json.loads(value)

    @staticmethod
    def dump_record(record: BaseModel) -> str:
        return record.model_dump_json()

    @staticmethod
    def load_record(model: type[M], value: str) -> M:
        return model.model_validate_json(value)

    @staticmethod
    def decode_episode(row: Sequence[Any]) -> tuple[Episode, Decision | None]:
        """An episode this store wrote: validated on the way in, so rebuilt without re-validation
        (the size and UTF-8 checks cost more than the policy's whole history read)."""
        data = json.loads(row[0])
        data["created_at"] = datetime.fromisoformat(data["created_at"])
        data["verification"] = [VerificationResult.model_construct(**v) for v in data.get("verification", [])]
        return Episode.model_construct(**data), Decision.model_validate_json(row[1]) if row[1] else None

    # ----------------------------------------------------------------- lessons

    @staticmethod
    def decode_lesson(row: sqlite3.Row) -> Lesson:
        data = {key: row[key] for key in row.keys() if key not in ("extra", "rank")}  # noqa: SIM118
        data.update(json.loads(row["extra"]))
        data["tags"] = json.loads(data["tags"])
        data["pinned"] = bool(data["pinned"])
        for key in ("last_accessed", "expires_at", "created_at", "updated_at"):
            data[key] = from_timestamp(data[key])
        return Lesson.model_construct(**data)

    def insert_lesson(self, conn: Connection, lesson: Lesson) -> bool:
        conn.execute(
            f"INSERT INTO lessons ({LESSON_COLUMNS}) VALUES ({question_marks(len(_NAMES))})", _params(lesson)
        )
        return True  # the write lock is held: the content hash was looked up in this transaction

    def overwrite_lesson(self, conn: Connection, lesson: Lesson, previous: Lesson | None = None) -> int:
        # Only the columns that differ from ``previous``: unchanged text is not re-indexed by the triggers.
        values = _params(lesson)
        before = _params(previous) if previous is not None else None
        changed = [i for i in range(2, len(_NAMES)) if before is None or values[i] != before[i]]
        if not changed:
            return 1
        assignments = ", ".join(f"{_NAMES[i]} = ?" for i in changed)
        return conn.execute(
            f"UPDATE lessons SET {assignments} WHERE id = ? AND namespace = ?",
            (*(values[i] for i in changed), lesson.id, lesson.namespace),
        ).rowcount

    @staticmethod
    def tag_filter(tags: Sequence[str]) -> tuple[str, list[Any]]:
        exists = "EXISTS (SELECT 1 FROM lesson_tags t WHERE t.tag = ? AND t.lesson_rowid = l.rowid)"
        return " AND ".join([exists] * len(tags)), list(tags)

    def lessons_changed(self, namespace: str) -> None:
        """Document frequencies follow the bank's size on their own (see _document_frequencies)."""

    @staticmethod
    def lock_pool(conn: Connection, namespace: str, pool: str) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already holds the database's write lock."""

    def bulk_import(self) -> AbstractContextManager[bool]:
        """Around the batches of one import: lessons' read-only indexes stand aside while it fills an
        empty bank (:mod:`~lessonbank.stores.sql.sqlite_bulk`)."""
        return sqlite_bulk.deferred_indexes(self.tx)

    def import_lessons(
        self, lessons: Sequence[Lesson], reinforced: Callable[[Lesson, Sequence[str]], Lesson]
    ) -> tuple[int, int]:
        """Bulk write in one transaction (see :meth:`import_prepared`)."""
        return self.import_prepared(import_rows(lessons))

    import_rows = staticmethod(import_rows)  # an import's worker process runs it (store.import_preparer)

    def import_prepared(self, prepared: ImportRows) -> tuple[int, int]:
        """Bulk write in one transaction, one upsert statement for the whole batch (the reinforce rule
        in SQL: see ``_UPSERT``); the new rows indexed in one pass each, their term vectors as made."""
        now = self.clock()
        rows = [(*row, now, now) for row in prepared.rows]
        repeats = [(*row, now, now) for row in prepared.repeats]
        with self.tx() as conn:
            last = conn.execute("SELECT coalesce(max(rowid), 0) FROM lessons").fetchone()[0]
            conn.execute("SAVEPOINT bulk")
            conn.execute("INSERT INTO bulk_load (marker) VALUES (1)")
            try:
                conn.executemany(_UPSERT, rows)
            except sqlite3.IntegrityError:  # an id collision: go row by row, renaming the intruders
                conn.execute("ROLLBACK TO bulk")
                conn.execute("INSERT INTO bulk_load (marker) VALUES (1)")
                for row in rows:
                    try:
                        conn.execute(_UPSERT, row)
                    except sqlite3.IntegrityError:
                        fresh = Lesson.model_fields["id"].get_default(call_default_factory=True)
                        conn.execute(_UPSERT, (fresh, *row[1:]))
            # Index the new rows in one pass (the insert trigger stood aside); reinforced rows were
            # re-indexed by the update trigger.
            conn.execute(
                "INSERT INTO lessons_fts (rowid, content, tags, learned_from) "
                "SELECT rowid, content, tags, learned_from FROM lessons WHERE rowid > ?",
                (last,),
            )
            conn.execute(
                "INSERT INTO lesson_tags (lesson_rowid, tag) SELECT l.rowid, t.value FROM lessons l, "
                "json_each(l.tags) t WHERE l.rowid > ?",
                (last,),
            )
            # One statement (a statement per row would also update AUTOINCREMENT's counter per row),
            # handed the vectors made before the transaction by a lookup.
            vectors = prepared.vectors
            conn.create_function(_IMPORTED_VECTOR, 2, lambda namespace, key: vectors[(namespace, key)])
            try:
                conn.execute(
                    "INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector) "
                    f"SELECT rowid, namespace, ?, '', {_IMPORTED_VECTOR}(namespace, content_hash) "
                    "FROM lessons WHERE rowid > ? ORDER BY rowid",
                    (LEXICAL_SPACE, last),
                )
            finally:
                conn.create_function(_IMPORTED_VECTOR, 2, None)  # the batch's vectors are not kept
            conn.execute(
                "INSERT INTO vector_counts (namespace, model, n) SELECT namespace, ?, count(*) FROM lessons "
                "WHERE rowid > ? GROUP BY namespace ORDER BY namespace "
                "ON CONFLICT (namespace, model) DO UPDATE SET n = n + excluded.n",
                (LEXICAL_SPACE, last),
            )
            conn.execute(
                "INSERT INTO lexical_stats (namespace, docs, tokens) SELECT l.namespace, count(*), "
                "sum(lb_doc_len(d.sz)) FROM lessons l JOIN lessons_fts_docsize d ON d.id = l.rowid "
                "WHERE l.rowid > ? GROUP BY l.namespace ORDER BY l.namespace ON CONFLICT (namespace) "
                "DO UPDATE SET docs = docs + excluded.docs, tokens = tokens + excluded.tokens",
                (last,),
            )
            conn.execute("DELETE FROM bulk_load")
            conn.executemany(_UPSERT, repeats)
            conn.execute("RELEASE bulk")
            added = conn.execute("SELECT count(*) FROM lessons WHERE rowid > ?", (last,)).fetchone()[0]
        return added, len(rows) + len(repeats) - added

    # ----------------------------------------------------------------- recall

    @staticmethod
    def credit(
        conn: Connection, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> int:
        unique = list(dict.fromkeys(lesson_ids))
        # "+namespace" keeps the planner on the id index: by the namespace index it would walk
        # every lesson of the namespace, on the record() path.
        return conn.execute(
            "UPDATE lessons SET helpful = helpful + ?, harmful = harmful + ? "
            f"WHERE id IN ({question_marks(len(unique))}) AND +namespace = ?",
            (helpful, harmful, *unique, namespace),
        ).rowcount

    @staticmethod
    def touch(conn: Connection, lesson_ids: Sequence[str], now: float) -> None:
        conn.executemany(
            "UPDATE lessons SET access_count = access_count + 1, last_accessed = ? WHERE id = ?",
            [(now, lesson_id) for lesson_id in lesson_ids],
        )

    # ----------------------------------------------------------------- vectors

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        if not rows:
            return 0
        written = 0
        with self.tx() as conn:
            for lesson_id, text_hash, vector in rows:
                row = conn.execute(
                    "SELECT rowid FROM lessons WHERE id = ? AND namespace = ?", (lesson_id, namespace)
                ).fetchone()
                if row is None:
                    continue
                # Delete then insert (not REPLACE, whose delete fires no trigger): AUTOINCREMENT
                # gives the new row a sequence number above every number ever handed out.
                conn.execute(
                    "DELETE FROM lesson_vectors WHERE lesson_rowid = ? AND model = ?", (row[0], model)
                )
                conn.execute(
                    "INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (row[0], namespace, model, text_hash, sqlite3.Binary(vector)),
                )
                written += 1
        return written

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        if not lesson_ids:
            return {}
        rows = self.connection().execute(
            "SELECT l.id, v.text_hash FROM json_each(?) j CROSS JOIN lessons l ON l.id = j.value "
            "CROSS JOIN lesson_vectors v ON v.lesson_rowid = l.rowid AND v.model = ? WHERE l.namespace = ?",
            (json.dumps(list(lesson_ids)), model, namespace),
        )
        return {row[0]: row[1] for row in rows.fetchall()}

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        conn = self.connection()
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")  # one snapshot: rows, sequence and count agree
        try:
            rows = conn.execute(
                "SELECT l.id, v.vector, v.seq FROM lesson_vectors v JOIN lessons l ON l.rowid = v.lesson_rowid "
                "WHERE v.namespace = ? AND v.model = ? AND v.seq > ? ORDER BY v.seq LIMIT ?",
                (namespace, model, after, VectorChanges.limit_of(limit)),
            ).fetchall()
            top, count = conn.execute(
                "SELECT (SELECT coalesce(max(seq), 0) FROM lesson_vectors WHERE namespace = ? AND model = ?), "
                "(SELECT coalesce(max(n), 0) FROM vector_counts WHERE namespace = ? AND model = ?)",
                (namespace, model, namespace, model),
            ).fetchone()
        finally:
            if own:
                conn.execute("COMMIT")
        return VectorChanges.page([(row[0], bytes(row[1]), row[2]) for row in rows], after, top, count, limit)

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        if limit <= 0:
            return []
        conn = self.connection()
        cursor = None
        if after is not None:
            cursor = conn.execute(
                "SELECT created_at, rowid FROM lessons WHERE id = ? AND namespace = ?", (after, namespace)
            ).fetchone()
        if cursor is None:
            complete = conn.execute(VECTORS_COMPLETE, (namespace, namespace, model)).fetchone()[0]
            if complete:
                return []
        # By key on (created_at, rowid), the order of the namespace's created_at index: a page
        # starts where the last one ended instead of walking every lesson before it again.
        keyset, params = (
            ("", ()) if cursor is None else ("AND (l.created_at, l.rowid) > (?, ?) ", tuple(cursor))
        )
        rows = conn.execute(
            f"SELECT {self.lesson_columns} FROM lessons l WHERE l.namespace = ? {keyset}AND NOT EXISTS "
            "(SELECT 1 FROM lesson_vectors v WHERE v.lesson_rowid = l.rowid AND v.model = ?) "
            "ORDER BY l.created_at, l.rowid LIMIT ?",
            (namespace, *params, model, limit),
        ).fetchall()
        return [self.decode_lesson(row) for row in rows]


def split_sql(script: str) -> list[str]:
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


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _params(lesson: Lesson) -> tuple[Any, ...]:
    """The lesson as a row of ``LESSON_COLUMNS``."""
    extra: dict[str, Any] = {
        name: getattr(lesson, name) for name in _EXTRA_FIELDS if getattr(lesson, name) is not None
    }
    if lesson.metadata:
        extra["metadata"] = lesson.metadata
    return (
        lesson.id,
        lesson.namespace,
        lesson.kind,
        lesson.content,
        lesson.content_hash,
        _json_tags(lesson.tags),
        lesson.task_type,
        lesson.agent,
        lesson.goal_id,
        lesson.trigger,
        lesson.importance,
        lesson.confidence,
        lesson.source,
        lesson.status,
        lesson.access_count,
        _ts(lesson.last_accessed),
        lesson.helpful,
        lesson.harmful,
        int(lesson.pinned),
        _ts(lesson.expires_at),
        lesson.supersedes,
        lesson.superseded_by,
        lesson.episode_id,
        lesson.reflection_id,
        lesson.created_at.timestamp(),
        lesson.updated_at.timestamp(),
        json.dumps(extra) if extra else "{}",
        lesson.learned_from,
    )


def _json_tags(tags: list[str]) -> str:
    """``json.dumps(tags)``: in one join when no tag holds a character JSON escapes (most tags)."""
    every = "".join(tags)
    if every.isascii() and every.isprintable() and '"' not in every and "\\" not in every:
        return '["' + '", "'.join(tags) + '"]' if tags else "[]"
    return json.dumps(tags)
