"""The Redis store's write transaction (:class:`~lessonbank.ports.LessonTx`): WATCHed reads, writes
buffered into one MULTI/EXEC.

Reads go through the WATCHing pipeline (a lesson's key, a content hash's key) and see the writes
the transaction has planned; the writes are recorded in ``steps`` and queued together at the end,
so a key that moved meanwhile makes the whole transaction plan again on what the other writer
committed (the decisions are :class:`~lessonbank.lessons.LessonWriter`'s, run again).

Pool caps (:class:`lessonbank.lessons.Cap`): a write to a capped pool WATCHes the pool's key and
bumps it in its MULTI/EXEC, so two writers of one pool never both commit what they planned from
the same reading: the second plans again on what the first wrote.

A transaction's ``steps`` map a key to ``(old, new)``: a lesson id to what was stored and what
is written (a Lesson), or to what was stored and the embedder models whose vectors go with it (a
list: the lesson is deleted); a pool key to ``(None, None)`` (bumped).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import WatchError

from lessonbank.lessons import LessonWriter, passes, pool_cap
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores.redis.db import Pipe, RedisDatabase
from lessonbank.stores.redis.index import RedisLessonIndex, row_passes


class RedisTx:
    """The lessons of one Redis transaction: reads on the WATCHing ``pipe``, writes into ``steps``."""

    def __init__(self, db: RedisDatabase, index: RedisLessonIndex, pipe: Pipe, steps: dict[str, Any]) -> None:
        self.db = db
        self.index = index
        self.pipe = pipe
        self.steps = steps

    def lock_pools(self, pools: Sequence[tuple[str, str]]) -> None:
        for namespace, pool in pools:
            key = self.db.k(namespace, "pool", pool)
            if key not in self.steps:
                self.pipe.watch(key)

    def _bump(self, lesson: Lesson) -> None:
        cap = pool_cap(lesson)
        key = self.db.k(lesson.namespace, "pool", cap.key) if cap is not None else None
        if key is not None and key not in self.steps:
            self.pipe.watch(key)
            self.steps[key] = (None, None)

    def holder(self, namespace: str, lesson_id: str) -> str | None:
        self.pipe.watch(self.index.lesson_key(namespace, lesson_id))  # reads from here on run at once
        found: str | None = self.pipe.hget(self.db.where_key, lesson_id)
        return found

    def by_hash(self, namespace: str, content_hash: str) -> Lesson | None:
        for _old, planned in self.steps.values():
            if (
                isinstance(planned, Lesson)
                and planned.namespace == namespace
                and planned.content_hash == content_hash
            ):
                return planned
        hash_key = self.db.k(namespace, "hash", content_hash)
        self.pipe.watch(hash_key)
        found = self.pipe.get(hash_key)
        return None if found is None else self.by_id(namespace, str(found))

    def by_id(self, namespace: str, lesson_id: str) -> Lesson | None:
        if lesson_id in self.steps:
            planned = self.steps[lesson_id][1]
            return planned if isinstance(planned, Lesson) and planned.namespace == namespace else None
        return self.index.read_lesson(self.pipe, namespace, lesson_id)

    def members(self, query: LessonQuery) -> list[Lesson]:
        now = self.db.clock()
        found = {lesson.id: lesson for lesson in self._stored(query, now)}
        for lesson_id, (old, new) in self.steps.items():
            if isinstance(new, Lesson):
                if passes(new, query, now):
                    found[lesson_id] = new
                else:
                    found.pop(lesson_id, None)
            elif old is not None:
                found.pop(lesson_id, None)
        return list(found.values())

    def add(self, lesson: Lesson) -> bool:
        self.pipe.watch(self.index.lesson_key(lesson.namespace, lesson.id))
        self.steps[lesson.id] = (None, lesson)
        self._bump(lesson)
        return True

    def put(self, lesson: Lesson, previous: Lesson | None) -> None:
        old = self.steps[lesson.id][0] if lesson.id in self.steps else previous
        self.steps[lesson.id] = (old, lesson)
        self._bump(lesson)

    def delete(self, lesson: Lesson) -> None:
        ns = lesson.namespace
        models_key = self.index.vec_models_key(ns)
        self.pipe.watch(models_key)
        models = sorted(self.pipe.smembers(models_key))
        if lesson.id in self.steps:
            stored = self.steps[lesson.id][0]
            if stored is None:
                del self.steps[lesson.id]  # planned in this transaction only: not written at all
                return
        else:
            stored = self.index.read_lesson(self.pipe, ns, lesson.id)
            if stored is None:
                raise WatchError("a lesson to remove was deleted meanwhile")
        self.steps[lesson.id] = (stored, models)

    def purge_expired(self, namespace: str) -> int:
        expiring = self.db.r.zrangebyscore(self.db.k(namespace, "expiring"), "-inf", self.db.clock())
        purged = 0
        for lesson_id in expiring:
            lesson = self.by_id(namespace, lesson_id)
            if lesson is not None:
                self.delete(lesson)
                purged += 1
        return purged

    def _stored(self, query: LessonQuery, now: float) -> list[Lesson]:
        ns = query.namespace
        ids = self.db.r.zrevrange(self.db.k(ns, "lessons"), 0, -1)
        passing: list[str] = []
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            for lesson_id, row in zip(chunk, self.index.rows(ns, chunk), strict=True):
                if row is not None and row_passes(row, query, now):
                    passing.append(lesson_id)
        return self.index.lessons_in(ns, passing)


class RedisPools:
    """Keeps the pool caps of the lessons a Redis transaction writes (updates and approvals)."""

    def __init__(self, db: RedisDatabase, index: RedisLessonIndex) -> None:
        self.db = db
        self.index = index
        self.writer = LessonWriter(lambda: db.clock())

    def tx(self, pipe: Pipe, steps: dict[str, Any]) -> RedisTx:
        return RedisTx(self.db, self.index, pipe, steps)

    def plan(self, pipe: Pipe, written: Lesson, steps: dict[str, Any]) -> None:
        """Record in ``steps`` what writing ``written`` drops from its pool, and the pool's bump."""
        tx = self.tx(pipe, steps)
        tx._bump(written)
        self.writer.keep_cap(tx, written)
