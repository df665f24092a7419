"""The memory store's audit log (the AuditLog port) and ``change_lesson``: a list per database, in the
order written, under the database's lock (a re-entrant lock, so a change and its audit entry are one
step: another thread sees both or neither). Rows are redacted as they are kept, as on every store."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from lessonbank.errors import NotFoundError
from lessonbank.models import AuditEntry, Lesson
from lessonbank.ports import LessonChange
from lessonbank.redact import redact_audit


class AuditData(Protocol):
    """What of a memory database the audit log uses."""

    lessons: dict[str, Lesson]
    audit: list[AuditEntry]


class MemoryAuditLog:
    """Audit methods of the memory store; the store provides its locked database and ``update_lesson``."""

    def _db(self) -> AbstractContextManager[AuditData]:
        raise NotImplementedError

    def update_lesson(self, lesson: Lesson, *, audit: AuditEntry | None = None) -> Lesson:
        raise NotImplementedError

    def change_lesson(self, namespace: str, lesson_id: str, change: LessonChange) -> Lesson:
        with self._db() as db:
            old = db.lessons.get(lesson_id)
            if old is None or old.namespace != namespace:
                raise NotFoundError("lesson", lesson_id)
            changed = change(old.model_copy(deep=True))
            if changed is None:
                return old.model_copy(deep=True)
            new, entry = changed
            stored = self.update_lesson(new)  # the lock is re-entrant: still this one step
            db.audit.append(redact_audit(entry).model_copy(deep=True))
            return stored

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        with self._db() as db:
            db.audit.extend(redact_audit(entry).model_copy(deep=True) for entry in entries)

    def audit_log(
        self, namespace: str, *, lesson_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        with self._db() as db:
            found = [
                entry
                for entry in reversed(db.audit)
                if entry.namespace == namespace and (lesson_id is None or entry.lesson_id == lesson_id)
            ]
            return [entry.model_copy(deep=True) for entry in found[:limit]]
