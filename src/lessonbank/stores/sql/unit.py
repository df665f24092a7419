"""The SQL stores' write transaction (:class:`~lessonbank.ports.LessonTx`) over one connection.

Every read is for a write: on PostgreSQL the rows are locked (``FOR UPDATE``) and each capped pool
by an advisory lock taken first, in one order; SQLite's ``BEGIN IMMEDIATE`` already holds the
database's write lock. The decisions are :class:`~lessonbank.lessons.LessonWriter`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores.sql.dialect import Connection, Dialect, lesson_filter


class SQLTx:
    """The lessons of one SQL transaction, read and written on ``conn``."""

    def __init__(self, dialect: Dialect, conn: Connection) -> None:
        self.dialect = dialect
        self.conn = conn

    def lock_pools(self, pools: Sequence[tuple[str, str]]) -> None:
        for namespace, pool in pools:
            self.dialect.lock_pool(self.conn, namespace, pool)

    def holder(self, namespace: str, lesson_id: str) -> str | None:
        row = self.conn.execute("SELECT namespace FROM lessons WHERE id = ?", (lesson_id,)).fetchone()
        return None if row is None else str(row[0])

    def by_hash(self, namespace: str, content_hash: str) -> Lesson | None:
        return self._one("l.namespace = ? AND l.content_hash = ?", (namespace, content_hash))

    def by_id(self, namespace: str, lesson_id: str) -> Lesson | None:
        return self._one("l.id = ? AND l.namespace = ?", (lesson_id, namespace))

    def _one(self, where: str, params: tuple[str, ...]) -> Lesson | None:
        d = self.dialect
        row = self.conn.execute(
            f"SELECT {d.lesson_columns} FROM lessons l WHERE {where}{d.for_update}", params
        ).fetchone()
        return None if row is None else d.decode_lesson(row)

    def members(self, query: LessonQuery) -> list[Lesson]:
        where, params = lesson_filter(self.dialect, query, self.dialect.clock())
        rows = self.conn.execute(f"SELECT {self.dialect.lesson_columns} FROM lessons l WHERE {where}", params)
        return [self.dialect.decode_lesson(row) for row in rows.fetchall()]

    def add(self, lesson: Lesson) -> bool:
        if not self.dialect.insert_lesson(self.conn, lesson):
            return False
        self.dialect.lessons_changed(lesson.namespace)
        return True

    def put(self, lesson: Lesson, previous: Lesson | None) -> None:
        self.dialect.overwrite_lesson(self.conn, lesson, previous)

    def delete(self, lesson: Lesson) -> None:
        self.conn.execute("DELETE FROM lessons WHERE id = ? AND namespace = ?", (lesson.id, lesson.namespace))
        self.dialect.lessons_changed(lesson.namespace)

    def purge_expired(self, namespace: str) -> int:
        """Rows another transaction is removing are skipped (PostgreSQL), so two writers purging at
        once never wait on each other; reads filter expired lessons until they are gone."""
        expired = "namespace = ? AND expires_at IS NOT NULL AND expires_at <= ?"
        purged = self.conn.execute(
            f"DELETE FROM lessons WHERE id IN (SELECT id FROM lessons WHERE {expired}{self.dialect.skip_locked})",
            (namespace, self.dialect.clock()),
        ).rowcount
        if purged:
            self.dialect.lessons_changed(namespace)
        return int(purged)
