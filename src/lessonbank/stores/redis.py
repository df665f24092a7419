"""The Redis store: many agents and many workers sharing one Redis.

``LessonBank("redis://127.0.0.1:6379/0")``; options in the URL query: ``prefix`` (put before
every key, for several banks in one database) and ``retry_s``. The key layout, transactions
and retries live in ``redis_db.py``, the job queue in ``redis_jobs.py``. Invariants:

- A lesson hash keeps the full Lesson JSON in ``data`` (new model fields round-trip); its other
  fields are copies for filtering and ranking, plus ``access_count``/``last_accessed`` which
  are counted in place and override the JSON on read.
- A lesson and all its index entries (content hash, tokens, tags, corpus counters, the seed
  000 keys of an insight) are written and removed in one MULTI/EXEC.
- Recall reads the token zsets of the query's selective words only (within the postings
  budget) and ranks with the same BM25 as the other stores: never a scan of every lesson.
- An episode and its job, and a job's result and its completion, are each one MULTI/EXEC.
- The Redis Query Engine (FT.*) is detected (``query_engine``) but recall uses the token
  index above on every server, so results do not depend on the server edition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC
from functools import partial
from typing import Any

from lessonbank.errors import NotFoundError, StoreError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection, from_timestamp
from lessonbank.stores.base import (
    CONFIDENCE_STEP,
    NEAR_DUPLICATE_JACCARD,
    Candidate,
    LessonQuery,
    LessonSort,
    StoreStats,
    WriteResult,
    pick_near_duplicate,
)
from lessonbank.stores.redis_db import Clock, Pipe
from lessonbank.stores.redis_index import RedisLessonIndex, episode_of, lesson_of, row_passes
from lessonbank.stores.shared import (
    check_sort,
    hashed,
    sort_lessons,
)
from lessonbank.text import keywords

IMPORT_CHUNK = 500


class RedisStore(RedisLessonIndex):
    """Redis persistence of episodes, lessons, reflections and jobs (see the module docstring)."""

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        super().__init__(url, clock=clock)

    # ----------------------------------------------------------------- episodes

    def record_episode(self, episode: Episode, decision: Decision, job: Job | None) -> Decision:
        """Store the episode and its job; an id already stored is a repeat (a retried call): no-op."""
        ns = episode.namespace or "default"
        key = self.k(ns, "episode", episode.id)

        def plan(pipe: Pipe) -> Callable[[Pipe], Decision]:
            pipe.watch(key)
            stored = pipe.hget(key, "decision")
            if stored is not None:
                return lambda p: Decision.model_validate_json(stored)
            final, insert = decision, job
            if job is not None:
                dedupe = self.k(ns, "dedupe", job.dedupe_key)
                pipe.watch(dedupe)
                existing = pipe.get(dedupe)
                if existing is not None:
                    final = Decision(
                        reflect=False,
                        trigger=decision.trigger,
                        reflector=decision.reflector,
                        reason=f"duplicate: an identical episode is already reflected (job {existing})",
                        job_id=str(existing),
                    )
                    insert = None

            def write(p: Pipe) -> Decision:
                if insert is not None:
                    self._q_insert_job(p, insert)
                p.hset(
                    key,
                    mapping={
                        "data": episode.model_dump_json(),
                        "decision": final.model_dump_json(),
                        "agent": episode.agent or "",
                    },
                )
                p.zadd(self.k(ns, "episodes"), {episode.id: episode.created_at.timestamp()})
                p.hset(self.where_key, episode.id, ns)
                p.sadd(self.namespaces_key, ns)
                return final

            return write

        return self._transact(plan)

    def get_episode(self, episode_id: str) -> tuple[Episode, Decision | None]:
        def run() -> list[Any] | None:
            ns = self.namespace_of(episode_id)
            if ns is None:
                return None
            row: list[Any] = self.r.hmget(self.k(ns, "episode", episode_id), ["data", "decision"])
            return row

        row = self._run(run)
        if not row or not row[0]:
            raise NotFoundError("episode", episode_id)
        return episode_of(row)

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        def run() -> list[tuple[Episode, Decision | None]]:
            out: list[tuple[Episode, Decision | None]] = []
            offset, page = 0, max(limit, 50)
            while len(out) < limit:
                ids = self.r.zrevrangebyscore(
                    self.k(namespace, "episodes"), "+inf", since, start=offset, num=page
                )
                if not ids:
                    break
                pipe = self.r.pipeline(transaction=False)
                for episode_id in ids:
                    pipe.hmget(self.k(namespace, "episode", episode_id), ["data", "decision", "agent"])
                for row in pipe.execute():
                    if row[0] and (agent is None or row[2] == agent):
                        out.append(episode_of(row))
                offset += page
            return out[:limit]

        return self._run(run)

    # ----------------------------------------------------------------- lessons

    def write_lesson(self, lesson: Lesson, *, threshold: float = NEAR_DUPLICATE_JACCARD) -> WriteResult:
        lesson = hashed(lesson)

        def plan(pipe: Pipe) -> Callable[[Pipe], WriteResult]:
            steps: dict[str, Any] = {}
            result = self._plan_lesson(pipe, lesson, similar, steps)
            return lambda p: self._q_apply(p, steps, result)

        similar = self._run(lambda: self._near_duplicate(lesson, threshold))
        return self._transact(plan)

    def _near_duplicate(self, lesson: Lesson, threshold: float) -> Lesson | None:
        """The stored lesson this one nearly repeats, searched outside any transaction."""
        terms = keywords(lesson.content)[:64]
        if not terms:
            return None
        found = self._search(LessonQuery(lesson.namespace, kinds=[lesson.kind]), terms, 20)
        candidates = self._lessons_in(lesson.namespace, [c.lesson_id for c in found])
        return pick_near_duplicate(lesson.content, candidates, threshold)

    def _plan_lesson(
        self, pipe: Pipe, lesson: Lesson, similar: Lesson | None, steps: dict[str, Any]
    ) -> WriteResult:
        """WATCH and read what writing ``lesson`` depends on; record the write in ``steps``.

        ``steps`` maps a lesson id to ``(old, new)``; a lesson planned earlier in the same
        transaction (same content twice in one job) is reinforced instead of added twice.
        """
        ns = lesson.namespace
        for old, new in steps.values():
            if new.namespace == ns and new.content_hash == lesson.content_hash:
                stored = self._reinforced(new, lesson.tags)
                steps[new.id] = (old, stored)
                return WriteResult(stored, "reinforced")
        hash_key = self.k(ns, "hash", lesson.content_hash)
        pipe.watch(hash_key)
        existing_id = pipe.get(hash_key)
        target = existing_id or (similar.id if similar is not None else None)
        if target is not None and target in steps:
            stored = self._reinforced(steps[target][1], lesson.tags)
            steps[target] = (steps[target][0], stored)
            return WriteResult(stored, "reinforced")
        if target is not None:
            current = self._read_lesson(pipe, ns, str(target))
            if current is not None and current.namespace == ns:
                stored = self._reinforced(current, lesson.tags)
                steps[stored.id] = (current, stored)
                return WriteResult(stored, "reinforced")
        steps[lesson.id] = (None, lesson)
        return WriteResult(lesson, "added")

    def _q_apply(self, pipe: Pipe, steps: dict[str, Any], result: Any) -> Any:
        for old, new in steps.values():
            self._q_write_lesson(pipe, new, old)
        return result

    def _reinforced(self, lesson: Lesson, new_tags: Sequence[str]) -> Lesson:
        now = from_timestamp(self.clock())
        return lesson.model_copy(
            update={
                "access_count": lesson.access_count + 1,
                "confidence": min(1.0, lesson.confidence + CONFIDENCE_STEP),
                "tags": list(dict.fromkeys([*lesson.tags, *new_tags]))[:32],
                "last_accessed": now,
                "updated_at": now,
            }
        )

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]:
        """Bulk write, one transaction per 500 lessons; the same content reinforces the stored lesson.

        Near duplicates are not looked for here. An imported id already taken gets a fresh id.
        """
        added = 0
        items = [hashed(lesson) for lesson in lessons]
        for start in range(0, len(items), IMPORT_CHUNK):
            chunk = items[start : start + IMPORT_CHUNK]
            added += self._transact(partial(self._plan_import, chunk=chunk))
        return added, len(items) - added

    def _plan_import(self, pipe: Pipe, *, chunk: Sequence[Lesson]) -> Callable[[Pipe], int]:
        hash_keys = [self.k(lesson.namespace, "hash", lesson.content_hash) for lesson in chunk]
        pipe.watch(*hash_keys)
        holders = pipe.mget(hash_keys)
        owners = pipe.hmget(self.where_key, [lesson.id for lesson in chunk])
        steps: dict[str, Any] = {}
        planned: dict[tuple[str, str], str] = {}
        fresh = 0
        for lesson, holder, owner in zip(chunk, holders, owners, strict=True):
            key = (lesson.namespace, lesson.content_hash)
            target = planned.get(key) or holder
            if target is not None:
                current = (
                    steps[target][1] if target in steps else self._read_lesson(pipe, lesson.namespace, target)
                )
                if current is not None:
                    old = steps[target][0] if target in steps else current
                    steps[current.id] = (old, self._reinforced(current, lesson.tags))
                    planned[key] = current.id
                    continue
            if owner is not None or lesson.id in steps:
                lesson = lesson.model_copy(
                    update={"id": Lesson.model_fields["id"].get_default(call_default_factory=True)}
                )
            steps[lesson.id] = (None, lesson)
            planned[key] = lesson.id
            fresh += 1
        return lambda p: self._q_apply(p, steps, fresh)

    def get_lesson(self, lesson_id: str) -> Lesson:
        found = self.get_lessons([lesson_id])
        if not found:
            raise NotFoundError("lesson", lesson_id)
        return found[0]

    def get_lessons(self, lesson_ids: Sequence[str]) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        if not lesson_ids:
            return []

        def run() -> list[Lesson]:
            spaces = self.r.hmget(self.where_key, list(lesson_ids))
            pipe = self.r.pipeline(transaction=False)
            for lesson_id, ns in zip(lesson_ids, spaces, strict=True):
                pipe.hmget(self._lesson_key(ns or "", lesson_id), ["data", "access_count", "last_accessed"])
            return [lesson for lesson in map(lesson_of, pipe.execute()) if lesson is not None]

        return self._run(run)

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        check_sort(sort)

        def run() -> list[Lesson]:
            ns = query.namespace
            if query.tags:
                ids = sorted(self.r.sinter([self.k(ns, "tag", tag) for tag in query.tags]))
            else:
                ids = self.r.zrevrange(self.k(ns, "lessons"), 0, -1)
            want = offset + limit if sort == "created" and not query.tags else None
            passing: list[str] = []
            now = self.clock()
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                for lesson_id, row in zip(chunk, self._rows(ns, chunk), strict=True):
                    if row is not None and row_passes(row, query, now):
                        passing.append(lesson_id)
                if want is not None and len(passing) >= want:
                    break
            if want is not None:
                return self._lessons_in(ns, passing[offset : offset + limit])
            lessons = sort_lessons(self._lessons_in(ns, passing), sort)
            return lessons[offset : offset + limit]

        return self._run(run)

    def delete_lesson(self, namespace: str, lesson_id: str) -> bool:
        def plan(pipe: Pipe) -> Callable[[Pipe], bool]:
            lesson = self._read_lesson(pipe, namespace, lesson_id)
            if lesson is None:
                return lambda p: False

            def write(p: Pipe) -> bool:
                self._q_delete_lesson(p, lesson)
                return True

            return write

        return self._transact(plan)

    def update_lesson(self, lesson: Lesson) -> Lesson:
        lesson = hashed(lesson)

        def plan(pipe: Pipe) -> Callable[[Pipe], Lesson]:
            old = self._read_lesson(pipe, lesson.namespace, lesson.id)
            if old is None:
                raise NotFoundError("lesson", lesson.id)
            hash_key = self.k(lesson.namespace, "hash", lesson.content_hash)
            pipe.watch(hash_key)
            holder = pipe.get(hash_key)
            if holder is not None and holder != lesson.id:
                raise StoreError(f"lesson {holder} already holds this content; update or forget that one")

            def write(p: Pipe) -> Lesson:
                self._q_write_lesson(p, lesson, old)
                return lesson

            return write

        return self._transact(plan)

    def purge_expired(self, namespace: str) -> int:
        expired = self._run(lambda: self.r.zrangebyscore(self.k(namespace, "expiring"), "-inf", self.clock()))
        return sum(self.delete_lesson(namespace, lesson_id) for lesson_id in expired)

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        return self._run(lambda: self._search(query, terms, limit))

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        now = self.clock()

        def run() -> None:
            spaces = self.r.hmget(self.where_key, list(lesson_ids))
            pipe = self.r.pipeline(transaction=True)
            for lesson_id, ns in zip(lesson_ids, spaces, strict=True):
                if ns is not None:
                    key = self._lesson_key(ns, lesson_id)
                    pipe.hincrby(key, "access_count", 1)
                    pipe.hset(key, "last_accessed", repr(now))
            pipe.execute()

        self._run(run)

    # ----------------------------------------------------------------- reflections

    def _q_insert_reflection(self, pipe: Pipe, reflection: Reflection) -> None:
        ns = reflection.namespace
        created = reflection.created_at.timestamp()
        pipe.set(self.k(ns, "reflection", reflection.id), reflection.model_dump_json())
        pipe.zadd(self.k(ns, "reflections"), {reflection.id: created})
        pipe.zadd(self.k(ns, "episode_reflections", reflection.episode_id), {reflection.id: created})
        pipe.hset(self.where_key, reflection.id, ns)

    def get_reflection(self, reflection_id: str) -> Reflection:
        def run() -> str | None:
            ns = self.namespace_of(reflection_id)
            return None if ns is None else self.r.get(self.k(ns, "reflection", reflection_id))

        data = self._run(run)
        if not data:
            raise NotFoundError("reflection", reflection_id)
        return Reflection.model_validate_json(data)

    def reflections_for_episode(self, episode_id: str) -> list[Reflection]:
        def run() -> list[Reflection]:
            ns = self.namespace_of(episode_id)
            if ns is None:
                return []
            ids = self.r.zrange(self.k(ns, "episode_reflections", episode_id), 0, -1)
            found = self.r.mget([self.k(ns, "reflection", i) for i in ids]) if ids else []
            return [Reflection.model_validate_json(data) for data in found if data]

        return self._run(run)

    def finish_job(
        self,
        job_id: str,
        owner: str,
        *,
        reflection: Reflection | None,
        lessons: Sequence[Lesson],
        detail: str,
    ) -> list[WriteResult]:
        hashed_lessons = [hashed(lesson) for lesson in lessons]
        similar = self._run(
            lambda: [self._near_duplicate(lesson, NEAR_DUPLICATE_JACCARD) for lesson in hashed_lessons]
        )

        def plan(pipe: Pipe) -> Callable[[Pipe], list[WriteResult]]:
            job, entry = self._leased(pipe, job_id, owner)
            steps: dict[str, Any] = {}
            results = [
                self._plan_lesson(pipe, lesson, twin, steps)
                for lesson, twin in zip(hashed_lessons, similar, strict=True)
            ]
            final = [WriteResult(steps[r.lesson.id][1], r.action) for r in results]
            now = from_timestamp(self.clock())
            done = job.model_copy(
                update={
                    "status": "done",
                    "finished_at": now,
                    "updated_at": now,
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "detail": detail,
                }
            )

            def write(p: Pipe) -> list[WriteResult]:
                self._q_apply(p, steps, None)
                if reflection is not None:
                    ids = [r.lesson.id for r in final]
                    self._q_insert_reflection(p, reflection.model_copy(update={"lesson_ids": ids}))
                self._q_save_job(p, done, job.status, entry="")
                self._q_unstream(p, done, entry)
                return final

            return write

        return self._transact(plan)

    # ----------------------------------------------------------------- stats

    def stats(self, namespace: str) -> StoreStats:
        return self._run(lambda: self._stats(namespace))

    def _stats(self, ns: str) -> StoreStats:
        stats = StoreStats(namespace=ns)
        stats.episodes = int(self.r.zcard(self.k(ns, "episodes")))
        ids = self.r.zrange(self.k(ns, "lessons"), 0, -1)
        for start in range(0, len(ids), 1000):
            for row in self._rows(ns, ids[start : start + 1000]):
                if row is None:
                    continue
                kind, status = row["kind"], row["status"]
                if status == "active":
                    stats.lessons[kind] = stats.lessons.get(kind, 0) + 1
                stats.lessons_by_status[status] = stats.lessons_by_status.get(status, 0) + 1
        ref_ids = self.r.zrange(self.k(ns, "reflections"), 0, -1)
        for start in range(0, len(ref_ids), 1000):
            chunk = ref_ids[start : start + 1000]
            for data in self.r.mget([self.k(ns, "reflection", i) for i in chunk]):
                if data:
                    _count_reflection(stats, Reflection.model_validate_json(data))
        stats.llm_calls = int(sum(r["calls"] for r in stats.by_reflector.values()))
        stats.cost_usd = float(sum(r["cost_usd"] for r in stats.by_reflector.values()))
        stats.by_reflector = dict(sorted(stats.by_reflector.items()))
        stats.by_day = dict(sorted(stats.by_day.items()))
        stats.jobs = self.count_jobs([ns])
        return stats


# --------------------------------------------------------------------- helpers


def _count_reflection(stats: StoreStats, reflection: Reflection) -> None:
    stats.reflections[reflection.status] = stats.reflections.get(reflection.status, 0) + 1
    stats.tokens_in += reflection.tokens_in
    stats.tokens_out += reflection.tokens_out
    day = reflection.created_at.astimezone(UTC).strftime("%Y-%m-%d")
    for key, target in ((reflection.reflector, stats.by_reflector), (day, stats.by_day)):
        row = target.setdefault(
            key,
            {
                "reflections": 0,
                "calls": 0,
                "tokens_in": 0,
                "tokens_out": 0,
                "cost_usd": 0.0,
                "unpriced_calls": 0,
            },
        )
        row["reflections"] += 1
        row["calls"] += reflection.llm_calls
        row["tokens_in"] += reflection.tokens_in
        row["tokens_out"] += reflection.tokens_out
        row["cost_usd"] += reflection.cost_usd or 0.0
        row["unpriced_calls"] += int(reflection.cost_usd is None and reflection.llm_calls > 0)
