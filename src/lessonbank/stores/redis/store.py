"""The Redis store: many agents and many workers sharing one Redis.

``LessonBank("redis://127.0.0.1:6379/0")``; options in the URL query: ``prefix`` (put before
every key, for several banks in one database) and ``retry_s``. The key layout, transactions
and retries live in ``db.py``, the lesson index in ``index.py``, the job queue in ``queue.py``,
vectors in ``vectors.py``. Invariants:

- A lesson hash keeps the full Lesson JSON in ``data`` (new model fields round-trip); its other
  fields are copies for filtering and ranking, plus ``access_count``/``last_accessed`` which
  are counted in place and override the JSON on read.
- A lesson and all its index entries (content hash, token postings, tags, corpus counters, the
  seed 000 keys of an insight) are written and removed in one MULTI/EXEC.
- Search ranks by the postings of every query word with the BM25 of the other stores (each
  factor taken with the mean length at write time; see ``index.py`` and ``postings.py``): never a
  scan of every lesson. A bank written with the older layout is rebuilt on open (``upgrade.py``).
- An episode and its job, and a job's result and its completion, are each one MULTI/EXEC; so are a
  change to a lesson and its audit entry (``audit.py``).
- The Redis Query Engine (FT.*) is detected (``query_engine``) but recall uses the token
  index above on every server, so results do not depend on the server edition.
- Vectors are plain bytes in a hash per (namespace, model), scanned by the caller's in-process
  index (no server module needed). A script writes each with the next value of the model's
  counter, so sequence numbers are committed in order; removing a lesson removes its vectors in
  the same MULTI/EXEC.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

from lessonbank import queueing
from lessonbank.errors import NotFoundError
from lessonbank.lessons import (
    LessonWriter,
    check_sort,
    content_taken,
    duplicate_decision,
    episode_credit,
    pick_near_duplicate,
    sort_lessons,
)
from lessonbank.models import (
    JOB_TEXT_MAX_CHARS,
    AuditEntry,
    Decision,
    Episode,
    Job,
    Lesson,
    Reflection,
    truncated,
)
from lessonbank.ports import (
    NEAR_DUPLICATE_JACCARD,
    NEAR_DUPLICATE_POOL,
    Candidate,
    JobNotifier,
    LessonChange,
    LessonQuery,
    LessonSort,
    Placement,
    Purged,
    RetentionCutoffs,
    StoreStats,
    WriteResult,
)
from lessonbank.scoping import check_id_free, visible
from lessonbank.stores.parts import FinishesJobs, ForwardsJobs, ForwardsVectors, JobResult, ReadsOneLesson
from lessonbank.stores.redis.audit import ForwardsAudit, RedisAudit
from lessonbank.stores.redis.consolidation import BuildsConsolidation
from lessonbank.stores.redis.db import Clock, Pipe, RedisDatabase
from lessonbank.stores.redis.index import (
    LESSON_FIELDS,
    Made,
    RedisLessonIndex,
    candidate_of,
    episode_of,
    import_rows,
    lesson_of,
    row_passes,
)
from lessonbank.stores.redis.pools import RedisPools, RedisTx
from lessonbank.stores.redis.queue import RedisJobQueue
from lessonbank.stores.redis.retention import RedisRetention
from lessonbank.stores.redis.upgrade import ensure_postings
from lessonbank.stores.redis.vectors import RedisVectors
from lessonbank.text import keywords

IMPORT_CHUNK = 500


class RedisStore(
    ForwardsJobs, FinishesJobs, ForwardsVectors, ForwardsAudit, BuildsConsolidation, ReadsOneLesson
):
    """Redis persistence of episodes, lessons, reflections and jobs (see the module docstring).

    Built from parts over one :class:`RedisDatabase` (``db``): the lesson index (``index``), the job
    queue (``jobs``: the JobQueue and JobAdmin ports) and the vectors (``vectors``: VectorStore).
    """

    notifier: JobNotifier | None = None
    term_vectors: bool = True  # the lesson index writes them with each lesson
    jobs: RedisJobQueue
    vectors: RedisVectors

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        self.db = RedisDatabase(url, clock=clock)
        self.index = RedisLessonIndex(self.db)
        ensure_postings(self.db, self.index)
        self.pools = RedisPools(self.db, self.index)
        self.jobs = RedisJobQueue(self.db)
        self.vectors = RedisVectors(self.db, self.index)
        self.retention = RedisRetention(self.db, self.jobs)
        self.audit = RedisAudit(self.db)
        self.writer = LessonWriter(lambda: self.clock())

    @property
    def clock(self) -> Clock:
        return self.db.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.db.clock = clock

    @property
    def r(self) -> Any:
        """The decoded redis-py client (for operators and tests)."""
        return self.db.r

    def k(self, namespace: str, *parts: str) -> str:
        return self.db.k(namespace, *parts)

    def close(self) -> None:
        self.db.close()

    # ----------------------------------------------------------------- episodes

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job, and credit the lessons injected for it (see the Store
        protocol), in one MULTI/EXEC; an id already stored is a repeat (a retried call): no-op."""
        ns = episode.namespace or "default"
        key = self.db.k(ns, "episode", episode.id)
        helpful, harmful = episode_credit(episode) if credit and episode.context_ids else (0, 0)

        def plan(pipe: Pipe) -> Callable[[Pipe], Decision]:
            pipe.watch(key)
            check_id_free("episode", episode.id, ns, pipe.hget(self.db.where_key, episode.id))
            stored = pipe.hget(key, "decision")
            if stored is not None:
                return lambda p: Decision.model_validate_json(stored)
            final, insert = decision, job
            if job is not None:
                dedupe = self.db.k(ns, "dedupe", job.dedupe_key)
                pipe.watch(dedupe)
                existing = pipe.get(dedupe)
                if existing is not None:
                    final = duplicate_decision(decision, str(existing))
                    insert = None

            def write(p: Pipe) -> Decision:
                if insert is not None:
                    self.jobs.q_insert_job(p, insert)
                p.hset(
                    key,
                    mapping={
                        "data": episode.model_dump_json(),
                        "decision": final.model_dump_json(),
                        "agent": episode.agent or "",
                    },
                )
                p.zadd(self.db.k(ns, "episodes"), {episode.id: episode.created_at.timestamp()})
                p.hsetnx(self.db.where_key, episode.id, ns)  # never moves another namespace's id
                p.sadd(self.db.namespaces_key, ns)
                if helpful or harmful:
                    self._q_credit(p, ns, episode.context_ids, helpful, harmful)
                return final

            return write

        return self.db.transact(plan)

    def get_episode(
        self, episode_id: str, *, namespace: str | None = None
    ) -> tuple[Episode, Decision | None]:
        def run() -> list[Any] | None:
            ns = self.db.namespace_of(episode_id)
            if ns is None or not visible(namespace, ns):
                return None
            row: list[Any] = self.db.r.hmget(self.db.k(ns, "episode", episode_id), ["data", "decision"])
            return row

        row = self.db.run(run)
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
                ids = self.db.r.zrevrangebyscore(
                    self.db.k(namespace, "episodes"), "+inf", since, start=offset, num=page
                )
                if not ids:
                    break
                pipe = self.db.r.pipeline(transaction=False)
                for episode_id in ids:
                    pipe.hmget(self.db.k(namespace, "episode", episode_id), ["data", "decision", "agent"])
                for row in pipe.execute():
                    if row[0] and (agent is None or row[2] == agent):
                        out.append(episode_of(row))
                offset += page
            return out[:limit]

        return self.db.run(run)

    # ----------------------------------------------------------------- lessons

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        lesson = self.writer.prepared(lesson)

        def plan(pipe: Pipe) -> Callable[[Pipe], WriteResult]:
            steps: dict[str, Any] = {}
            [result] = self.writer.write_all(
                self.pools.tx(pipe, steps), [lesson], [similar], duplicate_of=duplicate_of
            )
            return lambda p: self._q_apply(p, steps, result)

        similar = self.db.run(lambda: self._near_duplicate(lesson, threshold))
        return self.db.transact(plan)

    def write_lessons(
        self, lessons: Sequence[Lesson], *, place: Placement | None = None
    ) -> list[WriteResult]:
        prepared = [self.writer.prepared(lesson) for lesson in lessons]
        similar = self.db.run(lambda: [self._near_duplicate(x, NEAR_DUPLICATE_JACCARD) for x in prepared])

        def plan(pipe: Pipe) -> Callable[[Pipe], list[WriteResult]]:
            steps: dict[str, Any] = {}
            results = self._planned(self.pools.tx(pipe, steps), prepared, similar, place)
            return lambda p: self._q_apply(p, steps, results)

        return self.db.transact(plan)

    def _planned(
        self,
        tx: RedisTx,
        prepared: Sequence[Lesson],
        similar: Sequence[Lesson | None],
        place: Placement | None,
    ) -> list[WriteResult]:
        """Plan the write path (``LessonWriter.write_all``) in ``tx``; each result as finally planned
        (a lesson written twice in one transaction is returned as written the last time)."""
        results = self.writer.write_all(tx, prepared, similar, place=place)
        planned = [tx.steps.get(r.lesson.id, (None, None))[1] for r in results]
        return [
            WriteResult(p if isinstance(p, Lesson) else r.lesson, r.action)
            for p, r in zip(planned, results, strict=True)
        ]

    def _near_duplicate(self, lesson: Lesson, threshold: float) -> Lesson | None:
        """The stored lesson this one nearly repeats, searched outside any transaction."""
        query, terms = LessonQuery(lesson.namespace, kinds=[lesson.kind]), keywords(lesson.content)[:64]
        if not terms:
            return None
        found = self.index.search(query, terms, NEAR_DUPLICATE_POOL, selective=True)
        candidates = self.index.lessons_in(lesson.namespace, [c.lesson_id for c in found])
        return pick_near_duplicate(lesson.content, candidates, threshold)

    def _q_apply(self, pipe: Pipe, steps: dict[str, Any], result: Any) -> Any:
        changes: list[tuple[Lesson | None, Lesson | None, Sequence[str]]] = []
        for key, (old, new) in steps.items():  # see stores/redis/pools.py for what a step is
            if isinstance(new, Lesson):
                changes.append((old, new, ()))
            elif old is not None:
                changes.append((old, None, new))
            else:
                pipe.incr(key)
        if changes:
            self.index.q_changes(pipe, changes)
        return result

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]:
        """Bulk write, one transaction per 500 lessons; the same content reinforces the stored lesson.

        Near duplicates are not looked for here. An imported id already taken gets a fresh id.
        """
        return self.import_prepared(import_rows(lessons))

    def import_preparer(self) -> Callable[[Sequence[Lesson]], list[Made]]:
        """What an import's worker process runs on its lessons (rows, terms, vectors; no connection)."""
        return import_rows

    def import_prepared(self, made: Sequence[Made]) -> tuple[int, int]:
        """Write what :meth:`import_preparer` made, as :meth:`import_lessons` writes lessons."""
        added = 0
        items = [ahead.lesson for ahead in made]
        chunks = [items[start : start + IMPORT_CHUNK] for start in range(0, len(items), IMPORT_CHUNK)]
        # Two stages: while a thread waits for Redis to run one chunk's transaction, this one works
        # out the next chunk's rows, postings and term vectors (the socket wait releases the GIL).
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="lessonbank-import") as pool:
                running = None
                for start, chunk in zip(range(0, len(items), IMPORT_CHUNK), chunks, strict=True):
                    self.index.derive(chunk, made[start : start + IMPORT_CHUNK])
                    if running is not None:
                        added += running.result()
                    running = pool.submit(self.db.transact, partial(self._plan_import, chunk=chunk))
                if running is not None:
                    added += running.result()
        finally:
            self.index.derived.clear()
        return added, len(items) - added

    def _plan_import(self, pipe: Pipe, *, chunk: Sequence[Lesson]) -> Callable[[Pipe], int]:
        hash_keys = [self.db.k(lesson.namespace, "hash", lesson.content_hash) for lesson in chunk]
        pipe.watch(*hash_keys)
        holders = pipe.mget(hash_keys)
        owners = pipe.hmget(self.db.where_key, [lesson.id for lesson in chunk])
        steps: dict[str, Any] = {}
        planned: dict[tuple[str, str], str] = {}
        fresh = 0
        for lesson, holder, owner in zip(chunk, holders, owners, strict=True):
            key = (lesson.namespace, lesson.content_hash)
            target = planned.get(key) or holder
            if target is not None:
                current = (
                    steps[target][1]
                    if target in steps
                    else self.index.read_lesson(pipe, lesson.namespace, target)
                )
                if current is not None:
                    old = steps[target][0] if target in steps else current
                    steps[current.id] = (old, self.writer.reinforced(current, lesson.tags))
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

    def get_lessons(self, lesson_ids: Sequence[str], *, namespace: str | None = None) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        if not lesson_ids:
            return []

        def run() -> list[Lesson]:
            spaces = self.db.r.hmget(self.db.where_key, list(lesson_ids))
            pipe = self.db.r.pipeline(transaction=False)
            for lesson_id, ns in zip(lesson_ids, spaces, strict=True):
                if ns is not None and visible(namespace, ns):
                    pipe.hmget(self.index.lesson_key(ns, lesson_id), LESSON_FIELDS)
            return [lesson for lesson in map(lesson_of, pipe.execute()) if lesson is not None]

        return self.db.run(run)

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        check_sort(sort)

        def run() -> list[Lesson]:
            ns = query.namespace
            if query.tags:
                ids = sorted(self.db.r.sinter([self.db.k(ns, "tag", tag) for tag in query.tags]))
            else:
                ids = self.db.r.zrevrange(self.db.k(ns, "lessons"), 0, -1)
            want = offset + limit if sort == "created" and not query.tags else None
            passing: list[str] = []
            now = self.clock()
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                for lesson_id, row in zip(chunk, self.index.rows(ns, chunk), strict=True):
                    if row is not None and row_passes(row, query, now):
                        passing.append(lesson_id)
                if want is not None and len(passing) >= want:
                    break
            if want is not None:
                return self.index.lessons_in(ns, passing[offset : offset + limit])
            lessons = sort_lessons(self.index.lessons_in(ns, passing), sort)
            return lessons[offset : offset + limit]

        return self.db.run(run)

    def delete_lesson(self, namespace: str, lesson_id: str, *, audit: AuditEntry | None = None) -> bool:
        def plan(pipe: Pipe) -> Callable[[Pipe], bool]:
            lesson = self.index.read_lesson(pipe, namespace, lesson_id)
            if lesson is None:
                return lambda p: False
            models_key = self.index.vec_models_key(namespace)
            pipe.watch(models_key)  # a model added meanwhile replans, so its vector goes too
            models = sorted(pipe.smembers(models_key))

            def write(p: Pipe) -> bool:
                self.index.q_delete_lesson(p, lesson, models)
                self.audit.q_append(p, [audit.of(lesson, None)] if audit is not None else [])
                return True

            return write

        return self.db.transact(plan)

    def update_lesson(self, lesson: Lesson, *, audit: AuditEntry | None = None) -> Lesson:
        lesson = self.writer.prepared(lesson)

        def plan(pipe: Pipe) -> Callable[[Pipe], Lesson]:
            old = self.index.read_lesson(pipe, lesson.namespace, lesson.id)
            if old is None:
                raise NotFoundError("lesson", lesson.id)
            return self._plan_update(pipe, old, lesson, audit.of(old, lesson) if audit is not None else None)

        return self.db.transact(plan)

    def change_lesson(self, namespace: str, lesson_id: str, change: LessonChange) -> Lesson:
        def plan(pipe: Pipe) -> Callable[[Pipe], Lesson]:
            old = self.index.read_lesson(pipe, namespace, lesson_id)
            if old is None:
                raise NotFoundError("lesson", lesson_id)
            changed = change(old)
            if changed is None:
                return lambda p: old
            return self._plan_update(pipe, old, self.writer.prepared(changed[0]), changed[1])

        return self.db.transact(plan)

    def _plan_update(
        self, pipe: Pipe, old: Lesson, lesson: Lesson, audit: AuditEntry | None
    ) -> Callable[[Pipe], Lesson]:
        """WATCH and read what overwriting ``old`` with ``lesson`` needs; return what queues it (and
        ``audit``, written in the same MULTI)."""
        hash_key = self.db.k(lesson.namespace, "hash", lesson.content_hash)
        pipe.watch(hash_key)
        content_taken(pipe.get(hash_key), lesson)
        steps: dict[str, Any] = {lesson.id: (old, lesson)}
        self.pools.plan(pipe, lesson, steps)

        def write(p: Pipe) -> Lesson:
            self.audit.q_append(p, [audit] if audit is not None else [])
            return cast(Lesson, self._q_apply(p, steps, lesson))

        return write

    def purge_expired(self, namespace: str) -> int:
        def plan(pipe: Pipe) -> Callable[[Pipe], int]:
            steps: dict[str, Any] = {}
            purged = self.pools.tx(pipe, steps).purge_expired(namespace)
            return lambda p: self._q_apply(p, steps, purged)

        return self.db.transact(plan)

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        return self.db.run(lambda: self.index.search(query, terms, limit))

    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        ids = list(dict.fromkeys(lesson_ids))
        if not ids:
            return []

        def run() -> list[Candidate]:
            now = self.clock()
            rows = self.index.rows(query.namespace, ids)
            return [
                candidate_of(lesson_id, row, 0.0)
                for lesson_id, row in zip(ids, rows, strict=True)
                if row is not None and row_passes(row, query, now)
            ]

        return self.db.run(run)

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        ids = list(dict.fromkeys(lesson_ids))
        if not ids or not (helpful or harmful):
            return 0
        keys = [self.index.lesson_key(namespace, lesson_id) for lesson_id in ids]
        return int(self.db.run(lambda: self.index.credit_script(keys=keys, args=[helpful, harmful])))

    def _q_credit(
        self, pipe: Pipe, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> None:
        keys = [self.index.lesson_key(namespace, lesson_id) for lesson_id in dict.fromkeys(lesson_ids)]
        self.index.credit_script(keys=keys, args=[helpful, harmful], client=pipe)

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        now = self.clock()

        def run() -> None:
            spaces = self.db.r.hmget(self.db.where_key, list(lesson_ids))
            pipe = self.db.r.pipeline(transaction=True)
            for lesson_id, ns in zip(lesson_ids, spaces, strict=True):
                if ns is not None:
                    key = self.index.lesson_key(ns, lesson_id)
                    pipe.hincrby(key, "access_count", 1)
                    pipe.hset(key, "last_accessed", repr(now))
            pipe.execute()

        self.db.run(run)

    # ----------------------------------------------------------------- reflections

    def _q_insert_reflection(self, pipe: Pipe, reflection: Reflection) -> None:
        ns = reflection.namespace
        created = reflection.created_at.timestamp()
        pipe.set(self.db.k(ns, "reflection", reflection.id), reflection.model_dump_json())
        pipe.zadd(self.db.k(ns, "reflections"), {reflection.id: created})
        pipe.zadd(self.db.k(ns, "episode_reflections", reflection.episode_id), {reflection.id: created})
        pipe.hset(self.db.where_key, reflection.id, ns)

    def get_reflection(self, reflection_id: str, *, namespace: str | None = None) -> Reflection:
        def run() -> str | None:
            ns = self.db.namespace_of(reflection_id)
            if ns is None or not visible(namespace, ns):
                return None
            data: str | None = self.db.r.get(self.db.k(ns, "reflection", reflection_id))
            return data

        data = self.db.run(run)
        if not data:
            raise NotFoundError("reflection", reflection_id)
        return Reflection.model_validate_json(data)

    def reflections_for_episode(self, episode_id: str, *, namespace: str | None = None) -> list[Reflection]:
        def run() -> list[Reflection]:
            ns = self.db.namespace_of(episode_id)
            if ns is None or not visible(namespace, ns):
                return []
            ids = self.db.r.zrange(self.db.k(ns, "episode_reflections", episode_id), 0, -1)
            found = self.db.r.mget([self.db.k(ns, "reflection", i) for i in ids]) if ids else []
            return [Reflection.model_validate_json(data) for data in found if data]

        return self.db.run(run)

    def _finish_job(self, job_id: str, owner: str, result: JobResult) -> list[WriteResult]:
        prepared = [self.writer.prepared(lesson) for lesson in result.lessons]
        similar = self.db.run(lambda: [self._near_duplicate(x, NEAR_DUPLICATE_JACCARD) for x in prepared])

        def plan(pipe: Pipe) -> Callable[[Pipe], list[WriteResult]]:
            job, entry = self.jobs.leased(pipe, job_id, owner)
            steps: dict[str, Any] = {}
            final = self._planned(self.pools.tx(pipe, steps), prepared, similar, result.place)
            done = queueing.done(job, self.clock(), truncated(result.detail, JOB_TEXT_MAX_CHARS))
            reflection = result.reflection_of(final)

            def write(p: Pipe) -> list[WriteResult]:
                self._q_apply(p, steps, None)
                if reflection is not None:
                    self._q_insert_reflection(p, reflection)
                self.jobs.q_save_job(p, done, job.status, entry="")
                self.jobs.q_unstream(p, done, entry)
                return final

            return write

        return self.db.transact(plan)

    def purge_old(self, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool = False) -> Purged:
        return self.retention.purge_old(namespace, cutoffs, dry_run=dry_run)

    # ----------------------------------------------------------------- stats

    def stats(self, namespace: str) -> StoreStats:
        return self.db.run(lambda: self._stats(namespace))

    def _stats(self, ns: str) -> StoreStats:
        stats = StoreStats(namespace=ns)
        stats.episodes = int(self.db.r.zcard(self.db.k(ns, "episodes")))
        ids = self.db.r.zrange(self.db.k(ns, "lessons"), 0, -1)
        for start in range(0, len(ids), 1000):
            for row in self.index.rows(ns, ids[start : start + 1000]):
                if row is None:
                    continue
                kind, status = row["kind"], row["status"]
                if status == "active":
                    stats.lessons[kind] = stats.lessons.get(kind, 0) + 1
                stats.lessons_by_status[status] = stats.lessons_by_status.get(status, 0) + 1
        ref_ids = self.db.r.zrange(self.db.k(ns, "reflections"), 0, -1)
        for start in range(0, len(ref_ids), 1000):
            chunk = ref_ids[start : start + 1000]
            for data in self.db.r.mget([self.db.k(ns, "reflection", i) for i in chunk]):
                if data:
                    stats.count_reflection(Reflection.model_validate_json(data))
        stats.total_spend()
        stats.jobs = self.count_jobs([ns])
        return stats
