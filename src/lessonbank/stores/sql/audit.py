"""The SQL store's audit log (the AuditLog port): the ``audit_log`` table (migration 4 on SQLite,
3 on PostgreSQL).

A row is written on the connection of the transaction that makes the change it records, so the two
commit or roll back together. Rows are read newest first by ``seq`` (the order they were written);
the full entry is kept as JSON in ``data``, with flat copies of what is filtered on. Every row is
redacted as it is written (:func:`~lessonbank.redact.redact_audit`): no secret reaches the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from lessonbank.models import AuditEntry
from lessonbank.redact import redact_audit
from lessonbank.stores.sql.dialect import Connection, Dialect, question_marks

_COLUMNS = ("id", "namespace", "at", "actor", "action", "lesson_id", "proposal_id", "data")


def insert_audit(dialect: Dialect, conn: Connection, entries: Sequence[AuditEntry]) -> None:
    """Write ``entries`` in the caller's transaction, secrets redacted (whoever built them)."""
    if not entries:
        return
    entries = [redact_audit(entry) for entry in entries]
    conn.executemany(
        f"INSERT INTO audit_log ({', '.join(_COLUMNS)}) VALUES ({question_marks(len(_COLUMNS))})",
        [
            (
                entry.id,
                entry.namespace,
                entry.at.timestamp(),
                entry.actor,
                entry.action,
                entry.lesson_id,
                entry.proposal_id,
                dialect.dump_record(entry),
            )
            for entry in entries
        ],
    )


def read_audit(
    dialect: Dialect, conn: Connection, namespace: str, lesson_id: str | None, limit: int
) -> list[AuditEntry]:
    """The namespace's rows (of ``lesson_id`` when given), newest first, at most ``limit``."""
    where, params = "namespace = ?", [namespace]
    if lesson_id is not None:
        where += " AND lesson_id = ?"
        params.append(lesson_id)
    rows = conn.execute(
        f"SELECT data FROM audit_log WHERE {where} ORDER BY seq DESC LIMIT ?", (*params, limit)
    ).fetchall()
    return [dialect.load_record(AuditEntry, row[0]) for row in rows]
