"""The memory store's write transaction (:class:`~lessonbank.ports.LessonTx`).

Each step is applied at once, under the database lock its caller holds: one lock guards the
whole database, so no pool needs its own, and nothing else runs between the reads and the writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lessonbank.lessons import Lookup, passes
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery


class _Store(Protocol):
    clock: Callable[[], float]

    def _put(self, db: Any, lesson: Lesson, old: Lesson | None) -> None: ...
    def _remove(self, db: Any, lesson: Lesson) -> None: ...


class MemoryTx:
    """The lessons of one memory database, read and written by its locked store."""

    def __init__(self, store: _Store, db: Any) -> None:
        self.store = store
        self.db = db

    def lock_pools(self, pools: Sequence[tuple[str, str]]) -> None:
        return None

    def holder(self, namespace: str, lesson_id: str) -> str | None:
        found = self.db.lessons.get(lesson_id)
        return found.namespace if found is not None else None

    def lookup(self, namespace: str, lookup: Lookup) -> Lesson | None:
        how, key = lookup
        return self.by_hash(namespace, key) if how == "hash" else self.by_id(namespace, key)

    def by_hash(self, namespace: str, content_hash: str) -> Lesson | None:
        found = self.db.holder_of(namespace, content_hash)
        return self.db.lessons.get(found) if found is not None else None

    def by_id(self, namespace: str, lesson_id: str) -> Lesson | None:
        found: Lesson | None = self.db.lessons.get(lesson_id)
        return found if found is not None and found.namespace == namespace else None

    def members(self, query: LessonQuery) -> list[Lesson]:
        space, now = self.db.spaces.get(query.namespace), self.store.clock()
        docs = space.docs if space is not None else ()
        return [self.db.lessons[i] for i in docs if passes(self.db.lessons[i], query, now)]

    def add(self, lesson: Lesson) -> bool:
        self.store._put(self.db, lesson, None)
        return True

    def put(self, lesson: Lesson, previous: Lesson | None) -> None:
        self.store._put(self.db, lesson, self.db.lessons.get(lesson.id))

    def delete(self, lesson: Lesson) -> None:
        self.store._remove(self.db, lesson)

    def purge_expired(self, namespace: str) -> int:
        now, space = self.store.clock(), self.db.spaces.get(namespace)
        expired = [
            self.db.lessons[i]
            for i in (space.docs if space is not None else ())
            if (when := self.db.lessons[i].expires_at) is not None and when.timestamp() <= now
        ]
        for lesson in expired:
            self.store._remove(self.db, lesson)
        return len(expired)
