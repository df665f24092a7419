"""The Redis store's audit log (the AuditLog port).

Keys (see ``db.py`` for ``B`` and how parts are encoded): ``B{ns}:audit`` list of entry JSON, newest
first; ``B{ns}:audit:{lesson_id}`` the same entries of one lesson. An entry is queued on the
MULTI/EXEC of the change it records, so both are written or neither; redacted as it is queued
(:func:`~lessonbank.redact.redact_audit`).
"""

from __future__ import annotations

from collections.abc import Sequence

from lessonbank.models import AuditEntry
from lessonbank.redact import redact_audit
from lessonbank.stores.redis.db import Pipe, RedisDatabase


class RedisAudit:
    """The audit lists of a Redis database."""

    def __init__(self, db: RedisDatabase) -> None:
        self.db = db

    def q_append(self, pipe: Pipe, entries: Sequence[AuditEntry]) -> None:
        """Queue ``entries`` on ``pipe`` (inside the caller's MULTI), secrets redacted."""
        for entry in entries:
            data = redact_audit(entry).model_dump_json()
            pipe.lpush(self.db.k(entry.namespace, "audit"), data)
            if entry.lesson_id is not None:
                pipe.lpush(self.db.k(entry.namespace, "audit", entry.lesson_id), data)

    def append(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return

        def run() -> None:
            with self.db.r.pipeline(transaction=True) as pipe:
                self.q_append(pipe, entries)
                pipe.execute()

        self.db.run(run)

    def read(self, namespace: str, lesson_id: str | None, limit: int) -> list[AuditEntry]:
        key = self.db.k(namespace, "audit", *([lesson_id] if lesson_id is not None else []))
        if limit <= 0:
            return []
        rows = self.db.run(lambda: self.db.r.lrange(key, 0, limit - 1))
        return [AuditEntry.model_validate_json(row) for row in rows]


class ForwardsAudit:
    """The AuditLog port of a store that keeps its audit lists in ``audit``."""

    audit: RedisAudit

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self.audit.append(entries)

    def audit_log(
        self, namespace: str, *, lesson_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        return self.audit.read(namespace, lesson_id, limit)
