"""Vectors in Redis: plain bytes in a hash per (namespace, model), never looked inside.

Invariants: a script writes each vector with the next value of the model's counter, so sequence
numbers are committed in order; a row whose lesson hash is gone is skipped; removing a lesson
removes its vectors in the same MULTI/EXEC (see ``index.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from lessonbank.models import Lesson
from lessonbank.ports import VectorChanges
from lessonbank.stores.redis.db import RedisDatabase
from lessonbank.stores.redis.index import RedisLessonIndex

VECTOR_CHUNK = 256  # rows per vector-writing script call
VECTOR_PAGE = 2000  # vectors per read (a script runs alone on the server: keep each one short)


class RedisVectors:
    """The VectorStore port of a Redis store."""

    def __init__(self, db: RedisDatabase, index: RedisLessonIndex) -> None:
        self.db = db
        self.index = index

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        latest = {lesson_id: (text_hash, vector) for lesson_id, text_hash, vector in rows}
        items = [(lesson_id, text_hash, vector) for lesson_id, (text_hash, vector) in latest.items()]
        written = 0
        for start in range(0, len(items), VECTOR_CHUNK):

            def put(chunk: Sequence[tuple[str, str, bytes]] = items[start : start + VECTOR_CHUNK]) -> int:
                pipe = self.db.r.pipeline(transaction=False)
                self.index.q_put_vectors(pipe, namespace, model, chunk)
                return int(pipe.execute()[0])

            written += self.db.run(put)
        return written

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(lesson_ids))
        if not ids:
            return {}
        found = self.db.run(lambda: self.db.r.hmget(self.index.vec_key(namespace, "vechash", model), ids))
        return {lesson_id: text_hash for lesson_id, text_hash in zip(ids, found, strict=True) if text_hash}

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        cut = VectorChanges.limit_of(limit)
        keys = [self.index.vec_key(namespace, what, model) for what in ("vecctr", "vecseq", "vec")]
        rows: dict[str, bytes] = {}
        top: int | None = None
        cursor, count, full = after, 0, False
        while cut < 0 or len(rows) < cut:
            size = VECTOR_PAGE if cut < 0 else min(VECTOR_PAGE, cut - len(rows))
            page: list[Any] = self.db.run(
                partial(self.index.vector_changes_script, keys=keys, args=[cursor, size])
            )
            if top is None:
                top = int(page[0])  # every write numbered up to here was visible at this first read
            count = int(page[1])
            found = page[2:]
            for index in range(0, len(found), 3):
                lesson_id = found[index].decode()
                rows.pop(lesson_id, None)  # a later page may hold a newer write: keep write order
                rows[lesson_id] = bytes(found[index + 2])
                cursor = max(cursor, int(float(found[index + 1])))
            full = len(found) >= 3 * size
            if not full:
                break
        if cut >= 0 and full and cursor < (top or 0):  # a page cut at its limit: more follow from `cursor`
            return VectorChanges(rows=list(rows.items()), seq=cursor, count=count, more=True)
        return VectorChanges(rows=list(rows.items()), seq=max(after, top or 0), count=count)

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        if limit <= 0:
            return []
        lessons_key = self.db.k(namespace, "lessons")

        def run() -> list[Lesson]:
            # From the rank after ``after`` in the lessons' (created_at, id) order: each page reads
            # its own slice of the sorted set, not every lesson before it again.
            rank = None if after is None else self.db.r.zrank(lessons_key, after)
            if rank is None:
                pipe = self.db.r.pipeline(transaction=True)
                pipe.zcard(lessons_key)
                pipe.zcard(self.index.vec_key(namespace, "vecseq", model))
                lessons, vectors = pipe.execute()
                if vectors >= lessons:  # vectors go with their lessons: as many means none is missing
                    return []
            missing: list[str] = []
            start, page = (0 if rank is None else int(rank) + 1), 1000
            while len(missing) < limit:
                ids = self.db.r.zrange(lessons_key, start, start + page - 1)
                if not ids:
                    break
                stored = self.db.r.hmget(self.index.vec_key(namespace, "vechash", model), ids)
                missing += [
                    lesson_id for lesson_id, text_hash in zip(ids, stored, strict=True) if not text_hash
                ]
                start += page
            return self.index.lessons_in(namespace, missing[:limit])

        return self.db.run(run)
