"""What differs between the SQL databases the shared store runs on, behind one protocol.

The shared SQL (:mod:`.store`, :mod:`.jobs`) is written with ``?`` placeholders and standard
syntax that SQLite and PostgreSQL both accept; a dialect runs it (PostgreSQL's connection turns
each ``?`` into ``%s``, so shared SQL never holds a literal ``%`` or ``?``). What one database
does its own way is a member of :class:`Dialect`:

- connections and transactions: a per-thread connection and ``BEGIN IMMEDIATE`` on SQLite, a
  pool, ``FOR UPDATE`` row locks and retried connection errors on PostgreSQL;
- the lessons table: columns plus an ``extra`` JSON on SQLite, filter columns plus the full
  JSONB record on PostgreSQL (:meth:`Dialect.decode_lesson`, :meth:`Dialect.insert_lesson`,
  :meth:`Dialect.overwrite_lesson`), and how a tag filter is expressed;
- lexical search (FTS5 vs the postings index), vectors (rowid vs id keys), bulk import,
  counters updated in place (PostgreSQL keeps its JSONB copy in step);
- job wake-ups (``NOTIFY`` on PostgreSQL, nothing on SQLite).

Built-in dialects: :class:`~lessonbank.stores.sql.sqlite.SQLiteDialect` and
:class:`~lessonbank.stores.sql.postgres.PostgresDialect`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from lessonbank.models import Decision, Episode, Lesson
from lessonbank.ports import Candidate, LessonQuery, VectorStore

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# Vectors go with their lessons: as many vectors of a model as lessons means none is missing, and
# counting is cheaper than walking every lesson to find that out (``embed_missing`` asks once a pass).
VECTORS_COMPLETE = (
    "SELECT (SELECT count(*) FROM lessons WHERE namespace = ?) <= "
    "(SELECT coalesce(max(n), 0) FROM vector_counts WHERE namespace = ? AND model = ?)"
)

# ORDER BY of each lesson sort (lessons aliased ``l``), newest first on ties: the SQL form of
# :func:`lessonbank.lessons.sort_lessons`.
SORTS: dict[str, str] = {
    "created": "l.created_at DESC",
    "access": "l.access_count DESC, l.created_at DESC",
    "confidence": "l.confidence DESC, l.created_at DESC",
    "utility": "(l.helpful + 1.0) / (l.helpful + l.harmful + 2.0) DESC, (l.helpful - l.harmful) DESC, "
    "l.created_at DESC",
    "score": "l.importance * (0.5 + l.confidence) DESC, l.created_at DESC",
}


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """A connection running ``?``-placeholder SQL (sqlite3's own; a translating wrapper on PostgreSQL)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any: ...


class Database(Protocol):
    """Connections and transactions."""

    clock: Callable[[], float]

    def read(self) -> AbstractContextManager[Connection]: ...
    def tx(self) -> AbstractContextManager[Connection]:
        """One write transaction: committed on success, rolled back on any error."""
        ...

    def run(self, fn: Callable[[], T]) -> T:
        """Call ``fn``, retried on connection errors where the database is a server."""
        ...

    def notify(self, conn: Connection, namespace: str) -> None:
        """Tell idle workers a job became runnable (on commit)."""
        ...

    def size_bytes(self, conn: Connection) -> int | None: ...
    def close(self) -> None: ...


class Syntax(Protocol):
    """SQL spelled differently, and how records are encoded in columns."""

    for_update: str  # appended to a SELECT that reads a row the transaction will write
    skip_locked: str  # appended to the lease query's inner SELECT
    greatest: str  # the two-argument maximum function
    integrity_errors: tuple[type[BaseException], ...]  # what a violated unique constraint raises
    episode_columns: tuple[str, ...]
    reflection_columns: tuple[str, ...]
    llm_calls: str  # SQL for a reflection's LLM call count
    utc_day: str  # SQL for the UTC day (YYYY-MM-DD) of ``created_at``

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...
    def json(self, value: Any) -> Any: ...
    def load_json(self, value: Any) -> Any: ...
    def dump_record(self, record: BaseModel) -> Any: ...
    def load_record(self, model: type[M], value: Any) -> M: ...
    def decode_episode(self, row: Sequence[Any]) -> tuple[Episode, Decision | None]: ...


class LessonRows(Protocol):
    """The lessons table, whose layout differs."""

    lesson_columns: str  # the select list :meth:`decode_lesson` reads (lessons aliased ``l``)

    def decode_lesson(self, row: Any) -> Lesson: ...
    def insert_lesson(self, conn: Connection, lesson: Lesson) -> bool:
        """Insert ``lesson``; False when its content hash is already taken in its namespace."""
        ...

    def overwrite_lesson(self, conn: Connection, lesson: Lesson, previous: Lesson | None = None) -> int:
        """Every stored field of the lesson with ``lesson.id`` (same namespace); rows changed.

        ``previous`` is the stored lesson as this transaction read it: a dialect may then write only
        what differs (so a reinforce or a supersede does not re-index unchanged text)."""
        ...

    def tag_filter(self, tags: Sequence[str]) -> tuple[str, list[Any]]: ...
    def lessons_changed(self, namespace: str) -> None:
        """Lessons were added or removed: drop what is cached about the namespace."""
        ...

    def lock_pool(self, conn: Connection, namespace: str, pool: str) -> None:
        """Hold the capped pool ``pool`` of ``namespace`` until the transaction ends, so two writers
        of one pool take turns (a no-op where a write transaction already excludes every other)."""
        ...

    def import_lessons(
        self, lessons: Sequence[Lesson], reinforced: Callable[[Lesson, Sequence[str]], Lesson]
    ) -> tuple[int, int]:
        """Bulk write of prepared lessons; a stored content hash is reinforced with ``reinforced``."""
        ...


class BM25Search(Protocol):
    """Recall candidates from a dialect's lexical index: FTS5 on SQLite
    (:class:`~lessonbank.stores.sql.sqlite_search.FtsSearch`), the postings columns on PostgreSQL
    (:class:`~lessonbank.stores.sql.postgres_search.PostingsIndex`)."""

    def search(
        self,
        conn: Connection,
        query: LessonQuery,
        terms: Sequence[str],
        limit: int,
        *,
        content_only: bool = False,
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 that pass the filters; ``content_only`` (the near-duplicate
        check on every write) matches the content alone and bounds the work."""
        ...

    def candidates(
        self, conn: Connection, query: LessonQuery, lesson_ids: Sequence[str]
    ) -> list[Candidate]: ...


class SearchDialect(Protocol):
    """Recall candidates (its ``lexical`` index) and the counters recall and outcomes move."""

    @property
    def lexical(self) -> BM25Search: ...

    def credit(
        self, conn: Connection, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> int: ...
    def touch(self, conn: Connection, lesson_ids: Sequence[str], now: float) -> None: ...


class Dialect(Database, Syntax, LessonRows, SearchDialect, VectorStore, Protocol):
    """One SQL database under the shared store (see the module docstring). Its vectors are the
    :class:`~lessonbank.ports.VectorStore` port itself: their tables differ too much to share SQL."""


def lesson_filter(dialect: Dialect, query: LessonQuery, now: float) -> tuple[str, list[Any]]:
    """The WHERE clause (lessons aliased ``l``) of :func:`lessonbank.lessons.passes`."""
    clauses = ["l.namespace = ?"]
    params: list[Any] = [query.namespace]
    for column, values in (("l.status", query.statuses), ("l.kind", query.kinds)):
        if values:
            clause, more = dialect.in_list(column, values)
            clauses.append(clause)
            params.extend(more)
    for column in ("task_type", "agent", "goal_id"):
        value = getattr(query, column)
        if value is not None:
            clauses.append(f"l.{column} = ?")
            params.append(value)
    if query.tags:
        clause, more = dialect.tag_filter(query.tags)
        clauses.append(clause)
        params.extend(more)
    if query.live_only:
        clauses.append("l.superseded_by IS NULL")
        clauses.append("(l.expires_at IS NULL OR l.expires_at > ?)")
        params.append(now)
    return " AND ".join(clauses), params


def question_marks(count: int) -> str:
    return ",".join("?" * count)
