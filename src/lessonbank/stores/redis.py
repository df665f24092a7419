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

import json
import time
import uuid
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
from lessonbank.stores.redis_db import BATCH_SCRIPT, Batch, Clock, Pipe
from lessonbank.stores.redis_jobs import RedisJobQueue
from lessonbank.stores.redis_seed import SeedMirror
from lessonbank.stores.shared import (
    POSTINGS_BUDGET,
    check_sort,
    choose_terms,
    common_idf,
    hashed,
    idf,
    index_terms,
    sort_lessons,
    term_weights,
)
from lessonbank.text import keywords

_ROW = (
    "kind",
    "status",
    "task_type",
    "agent",
    "goal_id",
    "tags",
    "superseded",
    "expires_at",
    "confidence",
    "pinned",
    "created_at",
    "access_count",
    "last_accessed",
)
_SEP = "\x1f"
CORPUS_TTL_S = 5.0
IMPORT_CHUNK = 500
PAGE = 64


class RedisStore(RedisJobQueue):
    """Redis persistence of episodes, lessons, reflections and jobs (see the module docstring)."""

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        super().__init__(url, clock=clock)
        self.seed = SeedMirror(self)
        self._corpus: dict[str, tuple[float, float]] = {}
        self._batch = self.r.register_script(BATCH_SCRIPT)

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
        return _episode(row)

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
                        out.append(_episode(row))
                offset += page
            return out[:limit]

        return self._run(run)

    # ----------------------------------------------------------------- lessons

    def _lesson_key(self, namespace: str, lesson_id: str) -> str:
        return self.k(namespace, "lesson", lesson_id)

    def _read_lesson(self, pipe: Pipe, namespace: str, lesson_id: str) -> Lesson | None:
        key = self._lesson_key(namespace, lesson_id)
        pipe.watch(key)
        return _lesson(pipe.hmget(key, ["data", "access_count", "last_accessed"]))

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

    def _q_write_lesson(self, pipe: Pipe, lesson: Lesson, old: Lesson | None) -> None:
        """Queue the writes that store ``lesson`` (replacing ``old``) and keep every index in step.

        They go out as one script call (see ``Batch``): a lesson touches ~30 keys, and one
        command instead of thirty is what makes bulk imports fast.
        """
        ns, batch = lesson.namespace, Batch()
        terms = index_terms(lesson.content, lesson.tags)
        old_terms = index_terms(old.content, old.tags) if old is not None else []
        batch.add("HSET", self._lesson_key(ns, lesson.id), *_flat(_row(lesson, terms)))
        for term in set(old_terms) - set(terms):
            batch.add("ZREM", self.k(ns, "tok", term), lesson.id)
        for term, weight in term_weights(terms, self._avg_len(ns)).items():
            batch.add("ZADD", self.k(ns, "tok", term), repr(weight), lesson.id)
        old_tags = set(old.tags) if old is not None else set()
        for tag in old_tags - set(lesson.tags):
            batch.add("SREM", self.k(ns, "tag", tag), lesson.id)
        for tag in set(lesson.tags) - old_tags:
            batch.add("SADD", self.k(ns, "tag", tag), lesson.id)
        if old is not None and old.content_hash != lesson.content_hash:
            batch.add("DEL", self.k(ns, "hash", old.content_hash))
        batch.add("SET", self.k(ns, "hash", lesson.content_hash), lesson.id)
        batch.add("ZADD", self.k(ns, "lessons"), repr(lesson.created_at.timestamp()), lesson.id)
        if lesson.expires_at is not None:
            batch.add("ZADD", self.k(ns, "expiring"), repr(lesson.expires_at.timestamp()), lesson.id)
        else:
            batch.add("ZREM", self.k(ns, "expiring"), lesson.id)
        batch.add("HINCRBY", self.k(ns, "corpus"), "docs", "0" if old is not None else "1")
        batch.add("HINCRBY", self.k(ns, "corpus"), "length", str(len(terms) - len(old_terms)))
        batch.add("HSET", self.where_key, lesson.id, ns)
        batch.add("SADD", self.namespaces_key, ns)
        batch.queue(pipe, self._batch)
        if old is None:
            self.seed.q_added(pipe, lesson)

    def _avg_len(self, namespace: str) -> float:
        """The namespace's mean lesson length in tokens, cached a few seconds (it drifts slowly)."""
        cached = self._corpus.get(namespace)
        if cached is not None and time.monotonic() - cached[0] < CORPUS_TTL_S:
            return cached[1]
        docs, length = self.r.hmget(self.k(namespace, "corpus"), ["docs", "length"])
        avg = int(length or 0) / max(1, int(docs or 0))
        self._corpus[namespace] = (time.monotonic(), avg)
        return avg

    def _q_delete_lesson(self, pipe: Pipe, lesson: Lesson) -> None:
        ns, batch = lesson.namespace, Batch()
        terms = index_terms(lesson.content, lesson.tags)
        batch.add("DEL", self._lesson_key(ns, lesson.id))
        for term in set(terms):
            batch.add("ZREM", self.k(ns, "tok", term), lesson.id)
        for tag in lesson.tags:
            batch.add("SREM", self.k(ns, "tag", tag), lesson.id)
        batch.add("DEL", self.k(ns, "hash", lesson.content_hash))
        batch.add("ZREM", self.k(ns, "lessons"), lesson.id)
        batch.add("ZREM", self.k(ns, "expiring"), lesson.id)
        batch.add("HINCRBY", self.k(ns, "corpus"), "docs", "-1")
        batch.add("HINCRBY", self.k(ns, "corpus"), "length", str(-len(terms)))
        batch.add("HDEL", self.where_key, lesson.id)
        batch.queue(pipe, self._batch)
        self.seed.q_removed(pipe, lesson)

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
            return [lesson for lesson in map(_lesson, pipe.execute()) if lesson is not None]

        return self._run(run)

    def _lessons_in(self, namespace: str, lesson_ids: Sequence[str]) -> list[Lesson]:
        pipe = self.r.pipeline(transaction=False)
        for lesson_id in lesson_ids:
            pipe.hmget(self._lesson_key(namespace, lesson_id), ["data", "access_count", "last_accessed"])
        return [lesson for lesson in map(_lesson, pipe.execute()) if lesson is not None]

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
                    if row is not None and _row_passes(row, query, now):
                        passing.append(lesson_id)
                if want is not None and len(passing) >= want:
                    break
            if want is not None:
                return self._lessons_in(ns, passing[offset : offset + limit])
            lessons = sort_lessons(self._lessons_in(ns, passing), sort)
            return lessons[offset : offset + limit]

        return self._run(run)

    def _rows(self, namespace: str, lesson_ids: Sequence[str]) -> list[dict[str, str] | None]:
        pipe = self.r.pipeline(transaction=False)
        for lesson_id in lesson_ids:
            pipe.hmget(self._lesson_key(namespace, lesson_id), list(_ROW))
        return [
            dict(zip(_ROW, values, strict=True)) if values[0] is not None else None
            for values in pipe.execute()
        ]

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

    def _search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 over the query's selective terms that pass the filters.

        Each token zset holds its lessons scored by the token's BM25 factor, so Redis ranks:
        ZUNIONSTORE weighted by the terms' IDF, then pages through the best until ``limit``
        lessons pass the filters. When every word is too common, the lessons where the rarest
        one weighs most are taken, all with the same relevance.
        """
        ns = query.namespace
        terms = list(dict.fromkeys(t for t in terms if t))
        if not terms or limit <= 0:
            return []
        pipe = self.r.pipeline(transaction=False)
        for term in terms:
            pipe.zcard(self.k(ns, "tok", term))
        pipe.hget(self.k(ns, "corpus"), "docs")
        *counts, docs_raw = pipe.execute()
        frequencies = dict(zip(terms, counts, strict=True))
        chosen, rarest = choose_terms(frequencies)
        if rarest is None:
            return []
        docs = int(docs_raw or 0)
        if not chosen:
            flat = common_idf(docs, rarest[0])
            return self._ranked(self.k(ns, "tok", rarest[1]), query, limit, lambda _: flat)
        weights = {self.k(ns, "tok", term): idf(docs, frequencies[term]) for term in chosen}
        union = self.k(ns, "tmp", uuid.uuid4().hex)
        pipe = self.r.pipeline(transaction=True)
        pipe.zunionstore(union, weights)
        if query.tags:
            pipe.zinterstore(union, {union: 1, **{self.k(ns, "tag", tag): 0 for tag in query.tags}})
        pipe.expire(union, 60)
        pipe.execute()
        try:
            return self._ranked(union, query, limit, lambda score: score)
        finally:
            self.r.delete(union)

    def _ranked(
        self, key: str, query: LessonQuery, limit: int, relevance: Callable[[float], float]
    ) -> list[Candidate]:
        """The best-scored members of zset ``key`` that pass the filters, as candidates."""
        out: list[Candidate] = []
        now, start, page = self.clock(), 0, max(PAGE, 2 * limit)
        while len(out) < limit:
            found = self.r.zrevrange(key, start, start + page - 1, withscores=True)
            if not found:
                break
            rows = self._rows(query.namespace, [lesson_id for lesson_id, _ in found])
            for (lesson_id, score), row in zip(found, rows, strict=True):
                if row is not None and _row_passes(row, query, now):
                    out.append(_candidate(lesson_id, row, relevance(score)))
            start += page
            if start >= POSTINGS_BUDGET:
                break  # the filters let few through: stop, as SQLite's postings budget does
        return out[:limit]

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


def _row(lesson: Lesson, terms: Sequence[str]) -> dict[str, str]:
    return {
        "data": lesson.model_dump_json(),
        "kind": lesson.kind,
        "status": lesson.status,
        "task_type": lesson.task_type or "",
        "agent": lesson.agent or "",
        "goal_id": lesson.goal_id or "",
        "tags": _SEP.join(lesson.tags),
        "superseded": "1" if lesson.superseded_by is not None else "",
        "expires_at": "" if lesson.expires_at is None else repr(lesson.expires_at.timestamp()),
        "confidence": repr(lesson.confidence),
        "pinned": "1" if lesson.pinned else "",
        "created_at": repr(lesson.created_at.timestamp()),
        "terms": " ".join(terms),
        "access_count": str(lesson.access_count),
        "last_accessed": "" if lesson.last_accessed is None else repr(lesson.last_accessed.timestamp()),
    }


def _flat(mapping: dict[str, str]) -> list[str]:
    return [item for pair in mapping.items() for item in pair]


def _row_passes(row: dict[str, str], query: LessonQuery, now: float) -> bool:
    """SQLite's lesson filters, on the flat fields of a lesson hash."""
    if query.statuses and row["status"] not in query.statuses:
        return False
    if query.kinds and row["kind"] not in query.kinds:
        return False
    for name in ("task_type", "agent", "goal_id"):
        wanted = getattr(query, name)
        if wanted is not None and row[name] != wanted:
            return False
    if query.tags and not set(query.tags) <= set(row["tags"].split(_SEP)):
        return False
    if row["superseded"]:
        return False
    return not row["expires_at"] or float(row["expires_at"]) > now


def _candidate(lesson_id: str, row: dict[str, str], relevance: float) -> Candidate:
    last_used = float(row["last_accessed"] or row["created_at"])
    return Candidate(
        lesson_id,
        float(relevance),
        int(row["access_count"] or 0),
        float(row["confidence"]),
        bool(row["pinned"]),
        last_used,
    )


def _lesson(values: Sequence[Any]) -> Lesson | None:
    """A lesson from its hash's ``data``, ``access_count`` and ``last_accessed`` fields."""
    data, access_count, last_accessed = values
    if not data:
        return None
    fields = json.loads(data)
    fields["access_count"] = int(access_count or 0)
    fields["last_accessed"] = float(last_accessed) if last_accessed else None
    return Lesson.model_validate(fields)


def _episode(row: Sequence[Any]) -> tuple[Episode, Decision | None]:
    return Episode.model_validate_json(row[0]), Decision.model_validate_json(row[1]) if row[1] else None
