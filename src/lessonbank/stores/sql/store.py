"""The SQL store, one for SQLite and PostgreSQL: episodes, reflections, lessons, jobs, vectors.

What differs between the two databases sits behind a :class:`~.dialect.Dialect`; this module
holds what is the same. Invariants:

- An episode and its job (and the credit of the lessons injected for it), and a job's result
  (reflection + lessons) and its completion, are each one transaction.
- A lesson is unique per (namespace, content_hash). How it is written (add, reinforce,
  supersede, the pool's cap, a job's pool placement) is decided by
  :meth:`~lessonbank.lessons.LessonWriter.write_all` on this store's transaction (``unit.SQLTx``:
  rows read ``FOR UPDATE`` and an advisory lock per pool on PostgreSQL; SQLite holds the database
  write lock); the store only offers the reads and writes. The near-duplicate search runs
  before, outside any write transaction, so writers are not kept waiting: two near duplicates
  written in the same instant by two processes may both be kept (exact duplicates never).
- Episodes recorded and lessons written at the same moment by several threads of one process share
  a transaction (:mod:`lessonbank.stores.group_commit`, :mod:`.episodes`): the same result as
  writing them one after another, each caller answered once its own write is committed; when the
  shared transaction fails, each write is retried alone, so only the bad one raises.
- Filters and sorts are :func:`lessonbank.lessons.passes` and ``sort_lessons`` in SQL.
- An audit entry given with a change to a lesson (update, delete, ``change_lesson``) is inserted
  in the change's transaction (``audit.py``); a proposal's apply is one transaction (``consolidation.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from lessonbank.errors import NotFoundError
from lessonbank.lessons import (
    LessonWriter,
    check_sort,
    content_taken,
    pick_near_duplicate,
    pools_of,
)
from lessonbank.models import AuditEntry, Decision, Episode, Job, Lesson, Reflection
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
from lessonbank.scoping import visible
from lessonbank.stores.group_commit import GroupCommit
from lessonbank.stores.parts import (
    FinishesJobs,
    ForwardsConsolidation,
    ForwardsJobs,
    ForwardsVectors,
    JobResult,
    ReadsOneLesson,
)
from lessonbank.stores.sql.audit import insert_audit, read_audit
from lessonbank.stores.sql.consolidation import SQLConsolidation
from lessonbank.stores.sql.dialect import SORTS, Connection, Dialect, lesson_filter, question_marks
from lessonbank.stores.sql.episodes import EpisodeWrite, EpisodeWriter
from lessonbank.stores.sql.queue import SQLJobQueue
from lessonbank.stores.sql.retention import purge_old
from lessonbank.stores.sql.unit import SQLTx
from lessonbank.text import keywords

Clock = Callable[[], float]
LessonWrite = tuple[Lesson, Lesson | None, str | None]  # a prepared lesson, its near duplicate, duplicate_of


class SQLStore(ForwardsJobs, FinishesJobs, ForwardsVectors, ForwardsConsolidation, ReadsOneLesson):
    """Every store port on one SQL database (see the module docstring)."""

    notifier: JobNotifier | None = None
    term_vectors: bool = False
    jobs: SQLJobQueue
    vectors: Dialect

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.clock: Clock = dialect.clock
        self.writer = LessonWriter(dialect.clock)
        self.jobs = SQLJobQueue(dialect)
        self.vectors = dialect
        self.consolidation = SQLConsolidation(dialect, self.writer, self._lock_pools, self._keep_cap)
        self._episode_writer = EpisodeWriter(dialect, self.jobs)
        self._episodes = GroupCommit(self._record_all, self._record_one)
        self._lessons = GroupCommit(
            self._write_lessons_in_turn, lambda item: self._write_lessons_in_turn([item])[0]
        )

    def close(self) -> None:
        self.dialect.close()

    # ----------------------------------------------------------------- episodes

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job, and credit the lessons injected for it (see the Store
        protocol), in one transaction; an id already stored is a repeat (a retried call): no-op.

        Episodes recorded at the same moment by several threads share that transaction
        (:mod:`lessonbank.stores.group_commit`); each call still returns once its own is committed."""
        return self._episodes((episode, decision, job, credit))

    def _record_all(self, items: Sequence[EpisodeWrite]) -> list[Decision]:
        def run() -> list[Decision]:
            with self.dialect.tx() as conn:
                return self._episode_writer.write_all(conn, items)

        return self.dialect.run(run)

    def _record_one(self, item: EpisodeWrite) -> Decision:
        def run() -> Decision:
            with self.dialect.tx() as conn:
                return self._episode_writer.write_one(conn, *item)

        return self.dialect.run(run)

    def get_episode(
        self, episode_id: str, *, namespace: str | None = None
    ) -> tuple[Episode, Decision | None]:
        where, params = _by_id(episode_id, namespace)
        rows = self._read(f"SELECT data, decision FROM episodes WHERE {where}", params)
        if not rows:
            raise NotFoundError("episode", episode_id)
        return self.dialect.decode_episode(rows[0])

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        where, params = "namespace = ? AND created_at >= ?", [namespace, since]
        if agent is not None:
            where += " AND agent = ?"
            params.append(agent)
        rows = self._read(
            f"SELECT data, decision FROM episodes WHERE {where} ORDER BY created_at DESC LIMIT ?",
            (*params, limit),
        )
        return [self.dialect.decode_episode(row) for row in rows]

    # ----------------------------------------------------------------- reflections

    def _insert_reflection(self, conn: Connection, reflection: Reflection) -> None:
        values = {
            "id": reflection.id,
            "namespace": reflection.namespace,
            "episode_id": reflection.episode_id,
            "job_id": reflection.job_id,
            "reflector": reflection.reflector,
            "trigger": reflection.trigger,
            "status": reflection.status,
            "model": reflection.model,
            "tokens_in": reflection.tokens_in,
            "tokens_out": reflection.tokens_out,
            "cost_usd": reflection.cost_usd,
            "llm_calls": reflection.llm_calls,
            "created_at": reflection.created_at.timestamp(),
            "data": self.dialect.dump_record(reflection),
        }
        columns = self.dialect.reflection_columns
        conn.execute(
            f"INSERT INTO reflections ({', '.join(columns)}) VALUES ({question_marks(len(columns))}) "
            "ON CONFLICT (id) DO NOTHING",
            [values[column] for column in columns],
        )

    def get_reflection(self, reflection_id: str, *, namespace: str | None = None) -> Reflection:
        where, params = _by_id(reflection_id, namespace)
        rows = self._read(f"SELECT data FROM reflections WHERE {where}", params)
        if not rows:
            raise NotFoundError("reflection", reflection_id)
        return self.dialect.load_record(Reflection, rows[0][0])

    def reflections_for_episode(self, episode_id: str, *, namespace: str | None = None) -> list[Reflection]:
        where, params = _by_id(episode_id, namespace, column="episode_id")
        rows = self._read(f"SELECT data FROM reflections WHERE {where} ORDER BY created_at", params)
        return [self.dialect.load_record(Reflection, row[0]) for row in rows]

    # ----------------------------------------------------------------- writing lessons

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        """Lessons written at the same moment by several threads share one transaction (group
        commit), written in turn in it as if one after another; the near-duplicate search runs
        before, in the caller's thread, outside any transaction (see the module docstring)."""
        lesson = self.writer.prepared(lesson)
        similar = self.dialect.run(lambda: self._near_duplicate(lesson, threshold))
        return self._lessons((lesson, similar, duplicate_of))

    def _write_lessons_in_turn(self, items: Sequence[LessonWrite]) -> list[WriteResult]:
        def run() -> list[WriteResult]:
            with self.dialect.tx() as conn:
                tx = SQLTx(self.dialect, conn)
                return [
                    self.writer.write_all(tx, [lesson], [similar], duplicate_of=duplicate_of)[0]
                    for lesson, similar, duplicate_of in items
                ]

        return self.dialect.run(run)

    def write_lessons(
        self, lessons: Sequence[Lesson], *, place: Placement | None = None
    ) -> list[WriteResult]:
        prepared = [self.writer.prepared(lesson) for lesson in lessons]

        def run() -> list[WriteResult]:
            similar = [self._near_duplicate(lesson, NEAR_DUPLICATE_JACCARD) for lesson in prepared]
            with self.dialect.tx() as conn:
                return self.writer.write_all(SQLTx(self.dialect, conn), prepared, similar, place=place)

        return self.dialect.run(run)

    def _near_duplicate(self, lesson: Lesson, threshold: float) -> Lesson | None:
        """The stored lesson this one nearly repeats, searched outside any write transaction."""
        terms = keywords(lesson.content)[:64]
        if not terms:
            return None
        query = LessonQuery(lesson.namespace, kinds=[lesson.kind])
        with self.dialect.read() as conn:
            found = self.dialect.lexical.search(conn, query, terms, NEAR_DUPLICATE_POOL, content_only=True)
            candidates = self._lessons_by_id(conn, [c.lesson_id for c in found])
        return pick_near_duplicate(lesson.content, candidates, threshold)

    def _lock_pools(self, conn: Connection, lessons: Sequence[Lesson]) -> None:
        """Lock the capped pools these lessons go to, in one order (two writers never wait on each other)."""
        SQLTx(self.dialect, conn).lock_pools(sorted({pool for x in lessons for pool in pools_of(x)}))

    def _keep_cap(self, conn: Connection, written: Lesson) -> None:
        """Delete what writing ``written`` pushes out of its pool (``lessons.Cap``); the pool is locked."""
        self.writer.keep_cap(SQLTx(self.dialect, conn), written)

    def bulk_import(self) -> AbstractContextManager[object]:
        """Held around the batches of one import (:meth:`import_lessons`): what the dialect does to
        speed a large one up (SQLite: ``sqlite_bulk``), nothing elsewhere."""
        bulk = getattr(self.dialect, "bulk_import", None)
        return bulk() if bulk is not None else contextlib.nullcontext()

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]:
        """Bulk write; the same content reinforces the stored lesson (near duplicates are not looked
        for: that costs a search per lesson). An imported id already taken by other content gets a
        fresh id."""
        return self.dialect.import_lessons([self.writer.prepared(x) for x in lessons], self.writer.reinforced)

    def import_preparer(self) -> Callable[[Sequence[Lesson]], Any] | None:
        """What makes lessons into the payload :meth:`import_prepared` writes, apart from any
        connection (a picklable function, so an import's worker process can run it), or None when
        the dialect writes lessons as they are."""
        importer = self._importer()
        return None if importer is None else functools.partial(import_payload, importer.import_rows)

    def import_prepared(self, payload: Any) -> tuple[int, int]:
        """Write what the :meth:`import_preparer` made, as :meth:`import_lessons` writes lessons."""
        importer = self._importer()
        assert importer is not None, "import_prepared without an import_preparer"
        added, reinforced = importer.import_prepared(payload)
        return int(added), int(reinforced)

    def _importer(self) -> Any:
        """Who makes import rows apart from the transaction and writes them (``import_rows``,
        ``import_prepared``): SQLite's dialect, PostgreSQL's bulk importer; None elsewhere."""
        for owner in (self.dialect, getattr(self.dialect, "importer", None)):
            if owner is not None and hasattr(owner, "import_rows"):
                return owner
        return None

    def update_lesson(self, lesson: Lesson, *, audit: AuditEntry | None = None) -> Lesson:
        lesson = self.writer.prepared(lesson)

        def run() -> int:
            with self.dialect.tx() as conn:
                self._lock_pools(conn, [lesson])
                holder = conn.execute(
                    "SELECT id FROM lessons WHERE namespace = ? AND content_hash = ?",
                    (lesson.namespace, lesson.content_hash),
                ).fetchone()
                if holder is not None and holder[0] != lesson.id:
                    if self._lessons_by_id(conn, [lesson.id]) == []:
                        return 0  # absent: NotFoundError before any other complaint
                    content_taken(holder[0], lesson)
                before = self._locked_lesson(conn, lesson.namespace, lesson.id) if audit else None
                changed = self.dialect.overwrite_lesson(conn, lesson)
                if changed:
                    self._keep_cap(conn, lesson)
                    if audit is not None:
                        insert_audit(self.dialect, conn, [audit.of(before, lesson)])
                return changed

        changed = self.dialect.run(run)
        if not changed:
            raise NotFoundError("lesson", lesson.id)
        self.dialect.lessons_changed(lesson.namespace)
        return lesson

    def delete_lesson(self, namespace: str, lesson_id: str, *, audit: AuditEntry | None = None) -> bool:
        def run() -> bool:
            with self.dialect.tx() as conn:
                before = self._locked_lesson(conn, namespace, lesson_id) if audit else None
                deleted = conn.execute(
                    "DELETE FROM lessons WHERE id = ? AND namespace = ?", (lesson_id, namespace)
                ).rowcount
                if deleted and audit is not None:
                    insert_audit(self.dialect, conn, [audit.of(before, None)])
                return deleted > 0

        deleted = self.dialect.run(run)
        self.dialect.lessons_changed(namespace)
        return deleted

    def change_lesson(self, namespace: str, lesson_id: str, change: LessonChange) -> Lesson:
        def run() -> Lesson:
            with self.dialect.tx() as conn:
                old = self._locked_lesson(conn, namespace, lesson_id)
                if old is None:
                    raise NotFoundError("lesson", lesson_id)
                changed = change(old)
                if changed is None:
                    return old
                new, entry = changed
                new = self.writer.prepared(new)
                self.dialect.overwrite_lesson(conn, new, old)
                insert_audit(self.dialect, conn, [entry])
                return new

        lesson = self.dialect.run(run)
        self.dialect.lessons_changed(namespace)
        return lesson

    def _locked_lesson(self, conn: Connection, namespace: str, lesson_id: str) -> Lesson | None:
        """The namespace's lesson, read for a write in this transaction (locked on PostgreSQL)."""
        row = conn.execute(
            f"SELECT {self.dialect.lesson_columns} FROM lessons l WHERE l.id = ? AND l.namespace = ?"
            f"{self.dialect.for_update}",
            (lesson_id, namespace),
        ).fetchone()
        return None if row is None else self.dialect.decode_lesson(row)

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        def run() -> None:
            with self.dialect.tx() as conn:
                insert_audit(self.dialect, conn, entries)

        if entries:
            self.dialect.run(run)

    def audit_log(
        self, namespace: str, *, lesson_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        def run() -> list[AuditEntry]:
            with self.dialect.read() as conn:
                return read_audit(self.dialect, conn, namespace, lesson_id, limit)

        return self.dialect.run(run)

    def purge_expired(self, namespace: str) -> int:
        def run() -> int:
            with self.dialect.tx() as conn:
                return SQLTx(self.dialect, conn).purge_expired(namespace)

        return self.dialect.run(run)

    # ----------------------------------------------------------------- reading lessons

    def get_lessons(self, lesson_ids: Sequence[str], *, namespace: str | None = None) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        if not lesson_ids:
            return []

        def run() -> list[Lesson]:
            with self.dialect.read() as conn:
                found = self._lessons_by_id(conn, lesson_ids)
            return [lesson for lesson in found if visible(namespace, lesson.namespace)]

        return self.dialect.run(run)

    def _lessons_by_id(self, conn: Connection, lesson_ids: Sequence[str]) -> list[Lesson]:
        if not lesson_ids:
            return []
        clause, params = self.dialect.in_list("l.id", list(dict.fromkeys(lesson_ids)))
        rows = conn.execute(f"SELECT {self.dialect.lesson_columns} FROM lessons l WHERE {clause}", params)
        by_id = {lesson.id: lesson for lesson in map(self.dialect.decode_lesson, rows.fetchall())}
        return [by_id[lesson_id] for lesson_id in lesson_ids if lesson_id in by_id]

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        check_sort(sort)
        where, params = lesson_filter(self.dialect, query, self.clock())
        rows = self._read(
            f"SELECT {self.dialect.lesson_columns} FROM lessons l WHERE {where} ORDER BY {SORTS[sort]} "
            "LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [self.dialect.decode_lesson(row) for row in rows]

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        def run() -> list[Candidate]:
            with self.dialect.read() as conn:
                return self.dialect.lexical.search(conn, query, terms, limit)

        return self.dialect.run(run)

    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        if not lesson_ids:
            return []

        def run() -> list[Candidate]:
            with self.dialect.read() as conn:
                return self.dialect.lexical.candidates(conn, query, lesson_ids)

        return self.dialect.run(run)

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        if not lesson_ids or not (helpful or harmful):
            return 0

        def run() -> int:
            with self.dialect.tx() as conn:
                return self.dialect.credit(conn, namespace, lesson_ids, helpful, harmful)

        return self.dialect.run(run)

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        now = self.clock()

        def run() -> None:
            with self.dialect.tx() as conn:
                self.dialect.touch(conn, lesson_ids, now)

        self.dialect.run(run)

    # ----------------------------------------------------------------- jobs (vectors and the rest of the queue: see ForwardsVectors, ForwardsJobs)

    def _finish_job(self, job_id: str, owner: str, result: JobResult) -> list[WriteResult]:
        prepared = [self.writer.prepared(lesson) for lesson in result.lessons]

        def run() -> list[WriteResult]:
            now = self.clock()
            similar = [self._near_duplicate(lesson, NEAR_DUPLICATE_JACCARD) for lesson in prepared]
            with self.dialect.tx() as conn:
                self.jobs.check_lease(conn, job_id, owner)
                tx = SQLTx(self.dialect, conn)
                written = self.writer.write_all(tx, prepared, similar, place=result.place)
                reflection = result.reflection_of(written)
                if reflection is not None:
                    self._insert_reflection(conn, reflection)
                self.jobs.mark_done(conn, job_id, result.detail, now)
                return written

        return self.dialect.run(run)

    # ----------------------------------------------------------------- retention

    def purge_old(self, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool = False) -> Purged:
        return purge_old(self.dialect, namespace, cutoffs, dry_run=dry_run)

    # ----------------------------------------------------------------- stats

    def stats(self, namespace: str) -> StoreStats:
        def run() -> StoreStats:
            with self.dialect.read() as conn:
                return self._stats(conn, namespace)

        return self.dialect.run(run)

    def _stats(self, conn: Connection, namespace: str) -> StoreStats:
        stats = StoreStats(namespace=namespace)
        row = conn.execute("SELECT count(*) FROM episodes WHERE namespace = ?", (namespace,)).fetchone()
        stats.episodes = int(row[0]) if row else 0
        for kind, status, n in conn.execute(
            "SELECT kind, status, count(*) FROM lessons WHERE namespace = ? GROUP BY kind, status",
            (namespace,),
        ).fetchall():
            if status == "active":
                stats.lessons[kind] = stats.lessons.get(kind, 0) + int(n)
            stats.lessons_by_status[status] = stats.lessons_by_status.get(status, 0) + int(n)
        for status, n, tokens_in, tokens_out in conn.execute(
            "SELECT status, count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) "
            "FROM reflections WHERE namespace = ? GROUP BY status",
            (namespace,),
        ).fetchall():
            stats.reflections[status] = int(n)
            stats.tokens_in += int(tokens_in)
            stats.tokens_out += int(tokens_out)
        calls = self.dialect.llm_calls
        spend = (
            f"count(*), coalesce(sum({calls}), 0), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), "
            f"coalesce(sum(cost_usd), 0.0), sum(CASE WHEN cost_usd IS NULL AND {calls} > 0 THEN 1 ELSE 0 END) "
            "FROM reflections WHERE namespace = ?"
        )
        for key, target in (("reflector", stats.by_reflector), (self.dialect.utc_day, stats.by_day)):
            for k, n, llm_calls, tokens_in, tokens_out, cost, unpriced in conn.execute(
                f"SELECT {key} AS k, {spend} GROUP BY k ORDER BY k", (namespace,)
            ).fetchall():
                target[k] = {
                    "reflections": int(n),
                    "calls": int(llm_calls),
                    "tokens_in": int(tokens_in),
                    "tokens_out": int(tokens_out),
                    "cost_usd": float(cost),
                    "unpriced_calls": int(unpriced or 0),
                }
        stats.llm_calls = int(sum(row["calls"] for row in stats.by_reflector.values()))
        stats.cost_usd = float(sum(row["cost_usd"] for row in stats.by_reflector.values()))
        scope, params = self.dialect.in_list("namespace", [namespace])
        stats.jobs = self.jobs.counts(conn, f"AND {scope}", params)
        stats.size_bytes = self.dialect.size_bytes(conn)
        return stats

    # ----------------------------------------------------------------- helpers

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        def run() -> list[Any]:
            with self.dialect.read() as conn:
                return conn.execute(sql, params).fetchall()

        return self.dialect.run(run)

    def _write_sql(self, sql: str, params: Sequence[Any]) -> int:
        def run() -> int:
            with self.dialect.tx() as conn:
                return conn.execute(sql, params).rowcount

        return self.dialect.run(run)


def _by_id(record_id: str, namespace: str | None, *, column: str = "id") -> tuple[str, tuple[str, ...]]:
    """The WHERE clause of a read by id, within ``namespace`` when one is given."""
    if namespace is None:
        return f"{column} = ?", (record_id,)
    return f"{column} = ? AND namespace = ?", (record_id, namespace)


def import_payload(rows: Callable[[Sequence[Lesson]], Any], lessons: Sequence[Lesson]) -> Any:
    """``lessons`` as stored (content hash set, tags capped), made into the dialect's import rows."""
    return rows([LessonWriter.prepared(lesson) for lesson in lessons])
