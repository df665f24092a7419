"""The PostgreSQL dialect: many agents and many workers on one shared database.

``postgresql://127.0.0.1:5432/test``; options in the URL query: ``schema`` (default ``public``),
``pool_min``/``pool_max`` (connection pool size, default 1/10), ``retry_s`` (how long connection
errors are retried, default 15). Invariants:

- Every connection runs in autocommit; writes that must go together run in one explicit
  transaction, so nothing is half written. Rows a write reads before changing them are locked
  (``FOR UPDATE``); the job queue leases with ``FOR UPDATE SKIP LOCKED``.
- The store's tables live in one schema; migrations are applied on open under an advisory lock.
- A connection error is retried for the retry budget; after it the caller gets a
  :class:`StoreError`. Retried calls are safe to repeat: a write either committed or did not,
  and writes are keyed by id.
- Each record keeps its full JSON in ``data`` (JSONB); the other columns are copies kept for
  filtering, sorting and indexing, written in the same statement (counters updated in place
  update both).
- A job made runnable sends ``NOTIFY lessonbank_jobs`` in its transaction (delivered on
  commit); idle workers LISTEN and wake at once instead of waiting for their next poll.
- Vectors are plain ``bytea`` in ``lesson_vectors`` (no server extension: pgvector is not on
  users' servers); the caller's in-process index scans them. Writes of one (namespace, model)
  hold an advisory lock, so their sequence numbers are committed in order. Each lesson's term
  vector is one of them (space ``lexical:terms-v1``), written in the lesson's transaction.
- Bulk import writes its new lessons and their term vectors with ``COPY`` (``postgres_import``), and
  analyzes the lessons table when it has grown fourfold since the last time, not after every batch
  (an ANALYZE cost ~100 µs a lesson imported). Between two, the planner scales the row counts it
  read by the table's pages, so its estimates follow the growth.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

from lessonbank.errors import ConfigError, StoreError
from lessonbank.models import Decision, Episode, Lesson, from_timestamp
from lessonbank.ports import VectorChanges
from lessonbank.stores.connection import RetryBudget, redacted, split_options
from lessonbank.stores.lexical import LEXICAL_SPACE, lesson_term_vector, term_vector_changed
from lessonbank.stores.sql import postgres_bulk
from lessonbank.stores.sql.dialect import VECTORS_COMPLETE, Connection
from lessonbank.stores.sql.migrations.postgres import MIGRATIONS, TERM_VECTORS
from lessonbank.stores.sql.postgres_import import BulkImport
from lessonbank.stores.sql.postgres_search import COLUMNS, PLACEHOLDERS, PostingsIndex

try:
    import psycopg
    from psycopg import errors, sql
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the PostgreSQL backend needs psycopg 3 and psycopg-pool: pip install 'lessonbank[postgres]'"
    ) from exc

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CHANNEL = "lessonbank_jobs"
_OPTIONS = ("schema", "pool_min", "pool_max", "retry_s")
LESSON_TIMES = ("last_accessed", "expires_at", "created_at", "updated_at")  # ISO strings in a lesson's JSON


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq URL without lessonbank's own query options, and those options."""
    return split_options(url, _OPTIONS, schemes={"postgres": "postgresql"})


@lru_cache(maxsize=1024)
def _native(query: str) -> str:
    """Shared ``?`` SQL as psycopg takes it."""
    return query.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A pooled psycopg connection running the shared ``?``-placeholder SQL."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, query: str, params: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self.raw.execute(_native(query), params)

    def executemany(self, query: str, rows: Iterable[Sequence[Any]], /) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(_native(query), rows)


class PostgresDialect:
    """A pool of connections to one schema of one PostgreSQL database."""

    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    greatest = "greatest"
    integrity_errors: tuple[type[BaseException], ...] = (errors.UniqueViolation,)
    episode_columns: tuple[str, ...] = ("id", "namespace", "created_at", "agent", "data", "decision")
    reflection_columns: tuple[str, ...] = (
        "id", "namespace", "episode_id", "reflector", "status", "tokens_in", "tokens_out", "cost_usd",
        "llm_calls", "created_at", "data",
    )  # fmt: skip
    lesson_columns = "l.data"
    llm_calls = "llm_calls"
    utc_day = "to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.clock = clock
        self.conninfo, options = parse_url(url)
        self.schema = options.get("schema", "public")
        if not self.schema or len(self.schema) > 63:
            raise ConfigError(f"bad schema name {self.schema!r} in {redacted(url)}")
        try:
            pool_min = int(options.get("pool_min", "1"))
            pool_max = int(options.get("pool_max", "10"))
            retry_s = float(options.get("retry_s", "15"))
        except ValueError as exc:
            raise ConfigError(f"bad option in {redacted(url)}: {exc}") from exc
        problem = (
            "pool_max must be at least 1" if pool_max < 1
            else "pool_min must be 0 or more" if pool_min < 0
            else f"pool_min ({pool_min}) is above pool_max ({pool_max})" if pool_min > pool_max
            else "retry_s must be 0 or more seconds" if not 0 <= retry_s < float("inf")
            else None
        )  # fmt: skip
        if problem:
            raise ConfigError(f"bad option in {redacted(url)}: {problem}")
        self._retry = RetryBudget(
            f"PostgreSQL at {redacted(url)}", (psycopg.OperationalError, PoolTimeout), budget_s=retry_s
        )
        self.lexical = PostingsIndex(self)
        self.importer = BulkImport(self)
        self._analyzed_rows, self._unanalyzed = 0.0, 0  # lessons at the last ANALYZE; imported since
        self._listeners: list[Callable[[], None]] = []
        self._listen_lock = threading.Lock()
        self._listen_thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._retry.call(self._migrate)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.conninfo,
            min_size=pool_min,
            max_size=pool_max,
            kwargs={"autocommit": True},
            configure=self._configure,
            check=ConnectionPool.check_connection,
            open=False,
            name="lessonbank",
            timeout=self._retry.budget_s,
        )
        self._pool.open()

    # ----------------------------------------------------------------- connections

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    def _migrate(self) -> None:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL at {redacted(self.url)}: {exc}") from exc
        with conn:
            if self._at_this_version(conn):
                # The usual open: nothing to migrate, so neither the migration lock nor the DDL (six
                # round trips fewer), only the check for the deferred indexes an import that died left
                # dropped, in a transaction when one is missing.
                if postgres_bulk.missing(PgConnection(conn)):
                    with conn.transaction():
                        postgres_bulk.restore(PgConnection(conn))
                return
            conn.execute("SELECT pg_advisory_lock(hashtext('lessonbank:' || %s))", (self.schema,))
            try:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
                self._configure(conn)
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version integer PRIMARY KEY, applied_at double precision NOT NULL)"
                )
                row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
                version = int(row[0]) if row else 0
                if version > len(MIGRATIONS):
                    raise StoreError(
                        f"schema {self.schema} was written by a newer lessonbank (version {version}, "
                        f"this version knows {len(MIGRATIONS)}); upgrade lessonbank"
                    )
                for number in range(version, len(MIGRATIONS)):
                    with conn.transaction():
                        conn.execute(MIGRATIONS[number])
                        if number + 1 == TERM_VECTORS:
                            self._backfill_term_vectors(PgConnection(conn))
                        conn.execute(
                            "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                            (number + 1, time.time()),
                        )
                with conn.transaction():  # an import that died left them dropped (postgres_bulk)
                    postgres_bulk.restore(PgConnection(conn))
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext('lessonbank:' || %s))", (self.schema,))

    def _at_this_version(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the schema is at this release's last migration, read without the migration lock:
        migrations commit one by one, so a process still migrating shows an older version (then the
        open waits for its lock, as any other that has a migration to run)."""
        self._configure(conn)
        try:
            row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        except errors.UndefinedTable:  # a new schema (or none yet)
            return False
        return row is not None and row[0] == len(MIGRATIONS)

    @contextmanager
    def read(self) -> Iterator[PgConnection]:
        if self._closed.is_set():
            raise StoreError(f"store {redacted(self.url)} is closed")
        with self._pool.connection() as conn:
            yield PgConnection(conn)

    @contextmanager
    def tx(self) -> Iterator[PgConnection]:
        """One transaction on a pooled connection: committed on success, rolled back on any error."""
        with self.read() as conn, conn.raw.transaction():
            yield conn

    def run(self, fn: Callable[[], T]) -> T:
        return self._retry.call(fn)

    def notify(self, conn: Connection, namespace: str) -> None:
        conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, namespace))

    def subscribe_jobs(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from another thread) whenever a job becomes runnable; returns an unsubscribe."""
        with self._listen_lock:
            self._listeners.append(callback)
            if self._listen_thread is None:
                self._listen_thread = threading.Thread(
                    target=self._listen_loop, name="lessonbank-listen", daemon=True
                )
                self._listen_thread.start()

        def unsubscribe() -> None:
            with self._listen_lock, contextlib.suppress(ValueError):
                self._listeners.remove(callback)

        return unsubscribe

    def _listen_loop(self) -> None:
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            with self._listen_lock:
                                listeners = list(self._listeners)
                            for listener in listeners:
                                listener()
            except psycopg.Error:
                self._closed.wait(1.0)  # the server went away: listen again once it is back

    def close(self) -> None:
        self._closed.set()
        self._pool.close()
        if self._listen_thread is not None and self._listen_thread is not threading.current_thread():
            self._listen_thread.join(timeout=5)

    def size_bytes(self, conn: Connection) -> int | None:
        size = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind = 'r'",
            (self.schema,),
        ).fetchone()
        return int(size[0]) if size and size[0] is not None else None

    # ----------------------------------------------------------------- encoding

    @staticmethod
    def in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    @staticmethod
    def json(value: Any) -> Jsonb:
        return Jsonb(value)

    @staticmethod
    def load_json(value: Any) -> Any:
        return value

    @staticmethod
    def dump_record(record: BaseModel) -> Jsonb:
        return Jsonb(record.model_dump(mode="json"))

    @staticmethod
    def load_record(model: type[M], value: Any) -> M:
        return model.model_validate(value)

    @staticmethod
    def decode_episode(row: Sequence[Any]) -> tuple[Episode, Decision | None]:
        return Episode.model_validate(row[0]), Decision.model_validate(row[1]) if row[1] else None

    # ----------------------------------------------------------------- lessons

    @staticmethod
    def decode_lesson(row: Sequence[Any]) -> Lesson:
        """A lesson this store wrote (its JSON, validated on the way in), rebuilt without validating
        it again, as SQLite does: a recall builds no validator and checks no stored text."""
        data = dict(row[0])
        for key in LESSON_TIMES:
            if data.get(key) is not None:
                data[key] = datetime.fromisoformat(data[key])
        return Lesson.model_construct(**data)

    def insert_lesson(self, conn: Connection, lesson: Lesson) -> bool:
        row, terms = self.lexical.values_and_terms(lesson)
        inserted = conn.execute(
            f"INSERT INTO lessons ({COLUMNS}) VALUES ({PLACEHOLDERS}) "
            "ON CONFLICT (namespace, content_hash) DO NOTHING RETURNING id",
            row,
        ).fetchone()
        if inserted is not None:
            self.write_term_vectors(conn, [lesson], [terms])
        return inserted is not None

    def overwrite_lesson(self, conn: Connection, lesson: Lesson, previous: Lesson | None = None) -> int:
        # One row: its JSONB copy and its derived columns are rewritten together, whatever changed.
        names = [c.strip() for c in COLUMNS.split(",")][2:]
        placeholders = PLACEHOLDERS.split(",")[2:]
        assignments = ", ".join(f"{n} = {p}" for n, p in zip(names, placeholders, strict=True))
        row, terms = self.lexical.values_and_terms(lesson)
        changed = conn.execute(
            f"UPDATE lessons SET {assignments} WHERE id = ? AND namespace = ?",
            (*row[2:], lesson.id, lesson.namespace),
        ).rowcount
        if changed and term_vector_changed(lesson, previous):
            self.write_term_vectors(conn, [lesson], [terms])
        return changed

    def write_term_vectors(
        self, conn: Connection, lessons: Sequence[Lesson], vectors: Sequence[bytes] | None = None
    ) -> None:
        """Write each lesson's term vector in the caller's transaction (after the lesson's row).

        Like every vector write, it holds the (namespace, space) advisory lock to its commit, so
        readers following the sequence miss none; one whose vector is unchanged keeps its number.
        """
        if vectors is None:
            vectors = [lesson_term_vector(lesson) for lesson in lessons]
        by_namespace: dict[str, list[tuple[str, bytes]]] = {}
        for lesson, vector in zip(lessons, vectors, strict=True):
            by_namespace.setdefault(lesson.namespace, []).append((lesson.id, vector))
        for namespace in sorted(by_namespace):  # one lock order for every writer
            group = by_namespace[namespace]
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(?))", (self.vector_lock(namespace, LEXICAL_SPACE),)
            )
            conn.execute(
                "INSERT INTO lesson_vectors (lesson_id, model, namespace, text_hash, vector) "
                "SELECT r.id, ?, ?, '', r.v FROM unnest(?::text[], ?::bytea[]) AS r(id, v) "
                "ON CONFLICT (lesson_id, model) DO UPDATE SET vector = excluded.vector, seq = excluded.seq "
                "WHERE lesson_vectors.vector IS DISTINCT FROM excluded.vector",
                (
                    LEXICAL_SPACE,
                    namespace,
                    [lesson_id for lesson_id, _ in group],
                    [vector for _, vector in group],
                ),
            )

    def vector_lock(self, namespace: str, model: str) -> str:
        return f"lessonbank:vectors:{self.schema}:{namespace}:{model}"

    def _backfill_term_vectors(self, conn: Connection) -> None:
        """Term vectors for the lessons stored before they were kept (migration 5), a page at a time."""
        after = ""
        while True:
            rows = conn.execute(
                "SELECT id, data FROM lessons WHERE id > ? ORDER BY id LIMIT 2000", (after,)
            ).fetchall()
            if not rows:
                return
            self.write_term_vectors(conn, [Lesson.model_validate(data) for _, data in rows])
            after = rows[-1][0]

    @staticmethod
    def tag_filter(tags: Sequence[str]) -> tuple[str, list[Any]]:
        return "l.tags @> ?::text[]", [list(tags)]

    def lessons_changed(self, namespace: str) -> None:
        self.lexical.forget(namespace)

    def lock_pool(self, conn: Connection, namespace: str, pool: str) -> None:
        """A transaction-scoped advisory lock on the pool: row locks alone would not stop two
        writers that each read the pool from both adding to it."""
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(?))",
            (f"lessonbank:pool:{self.schema}:{namespace}\x1f{pool}",),
        )

    def bulk_import(self) -> contextlib.AbstractContextManager[bool]:
        """Around one import: read-only indexes stand aside while it fills an empty bank (postgres_bulk)."""
        return postgres_bulk.deferred_indexes(self.tx)

    def import_lessons(
        self, lessons: Sequence[Lesson], reinforced: Callable[[Lesson, Sequence[str]], Lesson]
    ) -> tuple[int, int]:
        """Bulk write, one transaction per thousand."""
        added = repeated = 0
        for start in range(0, len(lessons), 1000):

            def run(chunk: Sequence[Lesson] = lessons[start : start + 1000]) -> tuple[int, int]:
                with self.tx() as conn:
                    written = self.importer.chunk(conn, chunk, reinforced)
                self.importer.committed()
                return written

            a, r = self.run(run)
            added, repeated = added + a, repeated + r
        self._unanalyzed += added
        if self._unanalyzed >= max(1000, self._analyzed_rows * 3):
            # Fresh statistics, or the planner keeps guessing for a while; taken again only when
            # the table has grown fourfold, so a bulk load of N lessons analyzes ~log4(N) times
            # (each samples up to 30k rows: at every half, a 100k import spent 2 s of server time).
            def analyze() -> float:
                with self.read() as conn:
                    conn.execute("ANALYZE lessons")
                    row = conn.execute(
                        "SELECT reltuples FROM pg_class WHERE oid = 'lessons'::regclass"
                    ).fetchone()
                    return float(row[0]) if row else 0.0

            self._analyzed_rows, self._unanalyzed = self.run(analyze), 0
        return added, repeated

    # ----------------------------------------------------------------- recall

    @staticmethod
    def credit(
        conn: Connection, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> int:
        # One statement: the row lock makes the additions atomic against any concurrent writer.
        return conn.execute(
            "UPDATE lessons SET helpful = helpful + ?, harmful = harmful + ?, data = data || "
            "jsonb_build_object('helpful', helpful + ?, 'harmful', harmful + ?) "
            "WHERE namespace = ? AND id = ANY(?)",
            (helpful, harmful, helpful, harmful, namespace, list(dict.fromkeys(lesson_ids))),
        ).rowcount

    @staticmethod
    def touch(conn: Connection, lesson_ids: Sequence[str], now: float) -> None:
        stamp = from_timestamp(now).isoformat()  # type: ignore[union-attr]
        conn.execute(
            "UPDATE lessons SET access_count = access_count + 1, last_used = ?, "
            "data = data || jsonb_build_object('access_count', access_count + 1, 'last_accessed', ?::text) "
            "WHERE id = ANY(?)",
            (now, stamp, list(lesson_ids)),
        )

    # ----------------------------------------------------------------- vectors

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        latest = {lesson_id: (text_hash, vector) for lesson_id, text_hash, vector in rows}
        if not latest:
            return 0
        ids = list(latest)
        hashes = [latest[i][0] for i in ids]
        vectors = [bytes(latest[i][1]) for i in ids]

        def run() -> int:
            for _ in range(3):
                try:
                    with self.tx() as conn:
                        # Writers of one (namespace, model) take turns, so sequence numbers are
                        # committed in the order they are drawn and readers miss none.
                        conn.execute(
                            "SELECT pg_advisory_xact_lock(hashtext(?))",
                            (self.vector_lock(namespace, model),),
                        )
                        return conn.execute(
                            "INSERT INTO lesson_vectors (lesson_id, model, namespace, text_hash, vector) "
                            "SELECT l.id, ?, l.namespace, r.h, r.v FROM unnest(?::text[], ?::text[], "
                            "?::bytea[]) AS r(id, h, v) JOIN lessons l ON l.id = r.id AND l.namespace = ? "
                            "ON CONFLICT (lesson_id, model) DO UPDATE SET text_hash = excluded.text_hash, "
                            "vector = excluded.vector, seq = excluded.seq",
                            (model, ids, hashes, vectors, namespace),
                        ).rowcount
                except errors.ForeignKeyViolation:
                    continue  # a lesson was deleted while this ran: the next pass skips it
            return 0  # pragma: no cover - lessons deleted under three passes in a row

        return self.run(run)

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        if not lesson_ids:
            return {}

        def run() -> list[Any]:
            with self.read() as conn:
                # By primary key only: with the namespace in the condition the planner, short of
                # fresh statistics, may walk the namespace's whole change index instead.
                return conn.execute(
                    "SELECT lesson_id, text_hash, namespace FROM lesson_vectors WHERE lesson_id = ANY(?) "
                    "AND model = ?",
                    (list(lesson_ids), model),
                ).fetchall()

        return {row[0]: row[1] for row in self.run(run) if row[2] == namespace}

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        cut = VectorChanges.limit_of(limit)

        def run() -> list[Any]:
            with self.read() if not after and cut < 0 else self.tx() as conn:
                if after or cut >= 0:
                    # Sequences are shared by every model, so the planner cannot tell that few rows
                    # of this one follow ``after``: it scanned the whole table (65 ms at 100k
                    # lessons and two models, for none) where the change index answers in 1 ms. A
                    # page is the index's next ``limit`` entries, however many rows follow.
                    conn.execute("SET LOCAL enable_seqscan = off")
                # One statement, one snapshot: the rows, the top sequence and the count agree. The
                # page is cut inside its own query, so the limit stops the index scan (in seq order).
                return conn.execute(
                    "WITH totals AS (SELECT (SELECT coalesce(max(seq), 0) FROM lesson_vectors WHERE "
                    "namespace = ? AND model = ?) AS top, (SELECT coalesce(max(n), 0) FROM vector_counts "
                    "WHERE namespace = ? AND model = ?) AS n), "
                    "page AS (SELECT lesson_id, vector, seq FROM lesson_vectors WHERE namespace = ? AND "
                    "model = ? AND seq > ? ORDER BY seq" + ("" if cut < 0 else f" LIMIT {cut}") + ") "
                    "SELECT t.top, t.n, v.lesson_id, v.vector, v.seq FROM totals t LEFT JOIN page v ON true",
                    (namespace, model, namespace, model, namespace, model, after),
                ).fetchall()

        found = self.run(run)
        top, count = (int(found[0][0]), int(found[0][1])) if found else (0, 0)
        rows = [(row[2], bytes(row[3]), row[4]) for row in found if row[2] is not None]
        rows.sort(key=lambda row: row[2])  # here: a sort in the server spilled a page to disk
        return VectorChanges.page(rows, after, top, count, limit)

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        if limit <= 0:
            return []

        def run() -> list[Any]:
            with self.read() as conn:
                cursor = None
                if after is not None:
                    cursor = conn.execute(
                        "SELECT created_at, seq FROM lessons WHERE id = ? AND namespace = ?",
                        (after, namespace),
                    ).fetchone()
                if cursor is None:
                    complete = conn.execute(VECTORS_COMPLETE, (namespace, namespace, model)).fetchone()
                    if complete is not None and complete[0]:
                        return []
                # By key on (created_at, seq) from where the last page ended: each page reads its
                # own rows of the created_at index, not every lesson before them again. OFFSET 0
                # keeps the check a probe of the primary key per lesson: as an anti-join, statistics
                # taken before the model had vectors (1 row) chose a nested loop over all of them,
                # and a page took seconds by the middle of 100k lessons.
                keyset, params = (
                    ("", ()) if cursor is None else ("AND (created_at, seq) > (?, ?) ", tuple(cursor))
                )
                return conn.execute(
                    missing_vectors_sql(keyset), (namespace, *params, model, limit)
                ).fetchall()

        return [Lesson.model_validate(row[0]) for row in self.run(run)]


def missing_vectors_sql(keyset: str) -> str:
    """One page of a namespace's lessons without a vector of a model, from where ``keyset`` says."""
    return (
        f"SELECT data FROM lessons l WHERE namespace = ? {keyset}AND NOT EXISTS (SELECT 1 "
        "FROM lesson_vectors v WHERE v.lesson_id = l.id AND v.model = ? OFFSET 0) "
        "ORDER BY created_at, seq LIMIT ?"
    )
