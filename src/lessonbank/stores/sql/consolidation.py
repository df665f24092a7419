"""The SQL store's consolidation records (the ConsolidationStore port): tables ``proposals``,
``dream_log`` and ``cycle_state`` (migration 5 on SQLite, 4 on PostgreSQL), each record as JSON in
``data`` with flat copies of what is filtered and ordered on.

``apply`` is one write transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL with the touched lessons
read ``FOR UPDATE`` in id order, so two applies never wait on each other in a circle): the lessons
are read, checked against the proposal (``stores/applying.py``), written through the dialect's
insert and overwrite (so FTS5 and its statistics, or the postings columns, follow), their pools
kept to their caps, the audit rows inserted and the proposal saved, or, on any error, none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lessonbank.errors import ConflictError, NotFoundError
from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.scoping import check_id_free
from lessonbank.stores.applying import check_writes
from lessonbank.stores.parts import Application
from lessonbank.stores.sql.audit import insert_audit
from lessonbank.stores.sql.dialect import Connection, Dialect, question_marks

# What the store lends for an apply: lock the pools of these lessons; evict what a written lesson
# pushes out of its pool (both in the caller's transaction).
LockPools = Callable[[Connection, Sequence[Lesson]], None]
KeepCap = Callable[[Connection, Lesson], None]


class SQLConsolidation:
    """Proposals, the dream log and cycle state on one SQL database."""

    def __init__(
        self, dialect: Dialect, writer: LessonWriter, lock_pools: LockPools, keep_cap: KeepCap
    ) -> None:
        self.dialect = dialect
        self.writer = writer
        self.lock_pools = lock_pools
        self.keep_cap = keep_cap

    # ----------------------------------------------------------------- proposals

    def save_proposal(self, proposal: Proposal) -> None:
        def run() -> None:
            with self.dialect.tx() as conn:
                self._save(conn, proposal)

        self.dialect.run(run)

    def _save(self, conn: Connection, proposal: Proposal) -> None:
        columns = {
            "namespace": proposal.namespace,
            "status": proposal.status,
            "created_at": proposal.created_at.timestamp(),
            "data": self.dialect.dump_record(proposal),
        }
        _save_row(self.dialect, conn, "proposals", "proposal", proposal.id, columns)

    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal:
        rows = self._read(
            "SELECT data FROM proposals WHERE id = ? AND namespace = ?", (proposal_id, namespace)
        )
        if not rows:
            raise NotFoundError("proposal", proposal_id)
        return self.dialect.load_record(Proposal, rows[0][0])

    def list_proposals(self, namespace: str, statuses: Sequence[str] | None, limit: int) -> list[Proposal]:
        where, params = "namespace = ?", [namespace]
        if statuses is not None:
            if not statuses:
                return []
            clause, more = self.dialect.in_list("status", list(statuses))
            where += f" AND {clause}"
            params.extend(more)
        rows = self._read(
            f"SELECT data FROM proposals WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
            (*params, max(limit, 0)),
        )
        return [self.dialect.load_record(Proposal, row[0]) for row in rows]

    def apply(self, application: Application) -> None:
        proposal, audit, state = application.proposal, application.audit, application.state
        prepared = [self.writer.prepared(lesson) for lesson in application.writes]
        d = self.dialect

        def run() -> None:
            with d.tx() as conn:
                self.lock_pools(conn, prepared)
                stored: dict[str, Lesson] = {}
                ids = sorted({lesson.id for lesson in prepared})
                if ids:
                    clause, params = d.in_list("l.id", ids)
                    rows = conn.execute(
                        f"SELECT {d.lesson_columns} FROM lessons l WHERE {clause} ORDER BY l.id{d.for_update}",
                        params,
                    ).fetchall()
                    stored = {lesson.id: lesson for lesson in map(d.decode_lesson, rows)}

                def holder_of(content_hash: str) -> str | None:
                    row = conn.execute(
                        "SELECT id FROM lessons WHERE namespace = ? AND content_hash = ?",
                        (proposal.namespace, content_hash),
                    ).fetchone()
                    return None if row is None else str(row[0])

                check_writes(proposal, prepared, stored, holder_of)
                for lesson in prepared:
                    old = stored.get(lesson.id)
                    if old is not None:
                        d.overwrite_lesson(conn, lesson, old)
                    elif not d.insert_lesson(conn, lesson):  # the same content committed meanwhile
                        raise ConflictError(
                            f"lesson {lesson.id} would have the same content as a lesson written meanwhile; "
                            "make the proposal again",
                            record_id=lesson.id,
                        )
                for lesson in prepared:  # after every write: an eviction never meets a write still to come
                    self.keep_cap(conn, lesson)
                insert_audit(d, conn, audit)
                self._save(conn, proposal)
                if state is not None:
                    self._put_state(conn, proposal.namespace, state)

        try:
            d.run(run)
        finally:
            d.lessons_changed(proposal.namespace)

    # ----------------------------------------------------------------- dream log and cycle state

    def save_dream(self, run: DreamRun) -> None:
        d = self.dialect

        def write() -> None:
            with d.tx() as conn:
                columns = {"namespace": run.namespace, "started_at": run.started_at.timestamp()}
                _save_row(d, conn, "dream_log", "dream run", run.id, {**columns, "data": d.dump_record(run)})

        d.run(write)

    def dreams(self, namespace: str, limit: int) -> list[DreamRun]:
        rows = self._read(
            "SELECT data FROM dream_log WHERE namespace = ? ORDER BY started_at DESC, id DESC LIMIT ?",
            (namespace, max(limit, 0)),
        )
        return [self.dialect.load_record(DreamRun, row[0]) for row in rows]

    def cycle_state(self, namespace: str) -> dict[str, Any]:
        rows = self._read("SELECT data FROM cycle_state WHERE namespace = ?", (namespace,))
        return dict(self.dialect.load_json(rows[0][0])) if rows else {}

    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None:
        d = self.dialect

        def run() -> None:
            with d.tx() as conn:
                self._put_state(conn, namespace, state)

        d.run(run)

    def _put_state(self, conn: Any, namespace: str, state: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO cycle_state (namespace, data) VALUES (?, ?) "
            "ON CONFLICT (namespace) DO UPDATE SET data = excluded.data",
            (namespace, self.dialect.json(state)),
        )

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        def run() -> list[Any]:
            with self.dialect.read() as conn:
                return conn.execute(sql, params).fetchall()

        return self.dialect.run(run)


def _save_row(
    d: Dialect, conn: Connection, table: str, kind: str, record_id: str, columns: dict[str, Any]
) -> None:
    """Insert the row ``record_id`` of ``table`` (a record with flat copies of what is filtered
    on), or replace the stored one; an id another namespace holds is refused (``check_id_free``)."""
    held = conn.execute(f"SELECT namespace FROM {table} WHERE id = ?{d.for_update}", (record_id,)).fetchone()
    check_id_free(kind, record_id, columns["namespace"], held[0] if held else None)
    names = ", ".join(columns)
    if held is None:
        conn.execute(
            f"INSERT INTO {table} (id, {names}) VALUES (?, {question_marks(len(columns))})",
            (record_id, *columns.values()),
        )
    else:
        assignments = ", ".join(f"{name} = ?" for name in columns)
        conn.execute(f"UPDATE {table} SET {assignments} WHERE id = ?", (*columns.values(), record_id))
