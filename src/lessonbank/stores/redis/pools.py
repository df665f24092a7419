"""Pool caps on Redis (:class:`lessonbank.lessons.Cap`), planned inside the writing transaction.

A write that adds to a capped pool WATCHes the pool's key and bumps it in its MULTI/EXEC, so two
writers of one pool never both commit what they planned from the same reading: the second plans
again on what the first wrote. The lessons it drops are read (and WATCHed) in the same plan.

A transaction's ``steps`` map a key to ``(old, new)``: a lesson id to what was stored and what
is written (a Lesson), or to what was stored and the embedder models whose vectors go with it (a
list: the lesson is deleted); a pool key to ``(None, None)`` (bumped).
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import WatchError

from lessonbank.lessons import pool_cap
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores.redis.db import Pipe, RedisDatabase
from lessonbank.stores.redis.index import RedisLessonIndex, row_passes


class RedisPools:
    """Keeps the pool caps of the lessons a Redis transaction writes."""

    def __init__(self, db: RedisDatabase, index: RedisLessonIndex) -> None:
        self.db = db
        self.index = index

    def plan(self, pipe: Pipe, written: Lesson, steps: dict[str, Any]) -> None:
        """Record in ``steps`` what writing ``written`` drops from its pool, and the pool's bump."""
        cap = pool_cap(written)
        if cap is None:
            return
        ns, now = written.namespace, self.db.clock()
        key = self.db.k(ns, "pool", cap.key)
        if key not in steps:
            pipe.watch(key)
            steps[key] = (None, None)
        members = {lesson.id: lesson for lesson in self._stored(cap.query, now)}
        for lesson_id, (old, new) in steps.items():
            if isinstance(new, Lesson):
                members[lesson_id] = new
            elif old is not None:
                members.pop(lesson_id, None)
        evicted = cap.evictions(list(members.values()), written, now)
        if not evicted:
            return
        models_key = self.index.vec_models_key(ns)
        pipe.watch(models_key)
        models = sorted(pipe.smembers(models_key))
        for extra in evicted:
            if extra.id in steps:
                stored = steps[extra.id][0]
                if stored is None:
                    del steps[extra.id]  # planned in this transaction only: not written at all
                    continue
            else:
                stored = self.index.read_lesson(pipe, ns, extra.id)
                if stored is None:
                    raise WatchError("a lesson of the pool was deleted meanwhile")
            steps[extra.id] = (stored, models)

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
