"""The in-memory store: every port of :class:`~lessonbank.ports.Store` in process memory, a test double.

``open_store("memory://")`` gives a private database that goes with its store; ``memory://<name>``
names a database every store opened on that name in this process shares (as processes share one
Redis), kept after they close, until :func:`drop_database` or the end of the process. Nothing
touches the disk. Invariants:

- One lock per database guards every read and write, so each method is one atomic step (what
  a transaction is to the SQL stores): an episode and its job, a job's result and the job
  leaving ``leased``, a lesson and its index entries and vectors change together. A step that
  cannot complete (a taken id) fails before it changes anything.
- Records are copied in and out: a caller changing a record it passed or got changes nothing stored.
- Lessons are written by :class:`~lessonbank.lessons.LessonWriter`'s decisions, filtered by
  :func:`~lessonbank.lessons.passes` and sorted by :func:`~lessonbank.lessons.sort_lessons`.
  Lexical relevance is the BM25 of :mod:`lessonbank.stores.lexical` (stemmed terms, field weights,
  every query word), computed at query time over the namespace's lessons of every status.
- Vectors: at most one per (lesson, model); each write takes the next number of its
  (namespace, model) counter, which never goes back; removing a lesson removes its vectors.
- Jobs (``memory_jobs.py``) are unique per (namespace, dedupe_key); a lease expires by the store
  clock, and a lease held by a process of this host that no longer exists is expired at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel

from lessonbank.errors import ConfigError, NotFoundError, StoreError
from lessonbank.lessons import (
    LessonWriter,
    check_sort,
    content_taken,
    duplicate_decision,
    episode_credit,
    last_used,
    passes,
    pick_near_duplicate,
    sort_lessons,
)
from lessonbank.models import AuditEntry, Decision, Episode, Job, Lesson, Reflection, from_timestamp, new_id
from lessonbank.ports import (
    NEAR_DUPLICATE_JACCARD,
    NEAR_DUPLICATE_POOL,
    Candidate,
    JobNotifier,
    LessonQuery,
    LessonSort,
    Placement,
    Purged,
    RetentionCutoffs,
    StoreStats,
    VectorChanges,
    WriteResult,
)
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.redact import redact_audit
from lessonbank.scoping import check_id_free, visible
from lessonbank.stores.lexical import (
    POSTINGS_BUDGET,
    bm25_factors,
    common_idf,
    idf,
    match_terms,
    query_terms,
)
from lessonbank.stores.memory_audit import MemoryAuditLog
from lessonbank.stores.memory_consolidation import MemoryConsolidation
from lessonbank.stores.memory_index import Space
from lessonbank.stores.memory_jobs import JobTable, MemoryJobQueue, count_jobs_in, insert_job
from lessonbank.stores.memory_retention import purge_old
from lessonbank.stores.memory_tx import MemoryTx
from lessonbank.stores.parts import FinishesJobs, JobResult, ReadsOneLesson
from lessonbank.text import keywords

__all__ = ["MemoryStore", "drop_database"]


R = TypeVar("R", bound=BaseModel)


def _copied(record: R) -> R:
    return record.model_copy(deep=True)


class _Data(JobTable):
    """One database: every record, by id, under one lock (the job table's)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows = 0
        self.lessons: dict[str, Lesson] = {}
        self.spaces: dict[str, Space] = {}
        self.episodes: dict[str, tuple[str, Episode, Decision]] = {}  # id -> (namespace, episode, decision)
        self.reflections: dict[str, Reflection] = {}
        self.vectors: dict[tuple[str, str], dict[str, tuple[str, bytes, int]]] = {}  # in write order
        self.vector_seq: dict[tuple[str, str], int] = {}
        self.audit: list[AuditEntry] = []  # in the order written
        self.proposals: dict[str, Proposal] = {}
        self.dream_log: dict[str, DreamRun] = {}
        self.cycle_states: dict[str, dict[str, Any]] = {}

    def namespaces(self) -> set[str]:
        lessons = {lesson.namespace for lesson in self.lessons.values()}
        return super().namespaces() | lessons | {ns for ns, _, _ in self.episodes.values()}

    def space(self, namespace: str) -> Space:
        return self.spaces.setdefault(namespace, Space())

    def holder_of(self, namespace: str, content_hash: str) -> str | None:
        space = self.spaces.get(namespace)
        return space.by_hash.get(content_hash) if space is not None else None

    def next_row(self) -> int:
        self.rows += 1
        return self.rows


_DATABASES: dict[str, _Data] = {}
_REGISTRY = threading.Lock()


def drop_database(name: str) -> None:
    """Forget the named database (``memory://<name>``); stores still open on it keep their data."""
    with _REGISTRY:
        _DATABASES.pop(name, None)


class MemoryStore(MemoryJobQueue, FinishesJobs, MemoryAuditLog, MemoryConsolidation, ReadsOneLesson):
    """Every store port in process memory (see the module docstring): a test double that passes the
    contract suite. ``MemoryStore()`` is private; ``MemoryStore("name")`` shares the named database."""

    __test__ = False
    notifier: JobNotifier | None = None
    term_vectors: bool = False

    def __init__(self, name: str = "", *, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.clock = clock
        self.writer = LessonWriter(clock)
        self._closed = False
        if name:
            with _REGISTRY:
                self._data = _DATABASES.setdefault(name, _Data())
        else:
            self._data = _Data()

    @classmethod
    def from_url(cls, url: str, *, clock: Callable[[], float] = time.time) -> MemoryStore:
        """``memory://`` (private) or ``memory://<name>`` (shared in this process)."""
        scheme, sep, name = url.partition("://")
        if scheme.lower() != "memory" or not sep or any(c in name for c in "/?#"):
            raise ConfigError(f"bad memory URL {url!r}: write memory:// or memory://<name>")
        return cls(name, clock=clock)

    def close(self) -> None:
        self._closed = True

    @contextmanager
    def _db(self) -> Iterator[_Data]:
        if self._closed:
            raise StoreError(f"memory store {self.name or '(private)'} is closed")
        with self._data.lock:
            yield self._data

    # ----------------------------------------------------------------- episodes

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job and credit the lessons injected for it (see the Store
        protocol), in one step; an id already stored is a repeat (a retried call): no-op."""
        ns = episode.namespace or "default"
        helpful, harmful = episode_credit(episode) if credit and episode.context_ids else (0, 0)
        with self._db() as db:
            stored = db.episodes.get(episode.id)
            if stored is not None:
                check_id_free("episode", episode.id, ns, stored[0])
                return _copied(stored[2])
            final = decision
            if job is not None:
                existing = db.dedupe.get((job.namespace, job.dedupe_key))
                if existing is not None:
                    final = duplicate_decision(decision, existing)
                else:
                    insert_job(db, job)
            db.episodes[episode.id] = (ns, _copied(episode), _copied(final))
            if helpful or harmful:
                self._credit(db, ns, episode.context_ids, helpful, harmful)
            return final

    def get_episode(
        self, episode_id: str, *, namespace: str | None = None
    ) -> tuple[Episode, Decision | None]:
        with self._db() as db:
            stored = db.episodes.get(episode_id)
            if stored is None or not visible(namespace, stored[0]):
                raise NotFoundError("episode", episode_id)
            return _copied(stored[1]), _copied(stored[2])

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        with self._db() as db:
            found = [
                (episode, decision)
                for ns, episode, decision in reversed(db.episodes.values())
                if ns == namespace
                and episode.created_at.timestamp() >= since
                and (agent is None or episode.agent == agent)
            ]
            found.sort(key=lambda pair: pair[0].created_at, reverse=True)
            return [(_copied(e), _copied(d)) for e, d in found[: max(0, limit)]]

    def get_reflection(self, reflection_id: str, *, namespace: str | None = None) -> Reflection:
        with self._db() as db:
            found = db.reflections.get(reflection_id)
            if found is None or not visible(namespace, found.namespace):
                raise NotFoundError("reflection", reflection_id)
            return _copied(found)

    def reflections_for_episode(self, episode_id: str, *, namespace: str | None = None) -> list[Reflection]:
        with self._db() as db:
            found = [
                r
                for r in db.reflections.values()
                if r.episode_id == episode_id and visible(namespace, r.namespace)
            ]
            return [_copied(r) for r in sorted(found, key=lambda r: r.created_at)]

    # ----------------------------------------------------------------- lessons

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        prepared = _copied(LessonWriter.prepared(lesson))
        with self._db() as db:
            self._check_new_ids(db, [prepared])
            similar = self._near_duplicate(db, prepared, threshold)
            [result] = self.writer.write_all(
                MemoryTx(self, db), [prepared], [similar], duplicate_of=duplicate_of
            )
            return WriteResult(_copied(result.lesson), result.action)

    def write_lessons(
        self, lessons: Sequence[Lesson], *, place: Placement | None = None
    ) -> list[WriteResult]:
        prepared = [_copied(LessonWriter.prepared(lesson)) for lesson in lessons]
        with self._db() as db:
            return self._write_all(db, prepared, place)

    def _write_all(self, db: _Data, prepared: list[Lesson], place: Placement | None) -> list[WriteResult]:
        """The write path (``LessonWriter.write_all``) under the lock, ids checked before anything."""
        self._check_new_ids(db, prepared)
        similar = [self._near_duplicate(db, lesson, NEAR_DUPLICATE_JACCARD) for lesson in prepared]
        results = self.writer.write_all(MemoryTx(self, db), prepared, similar, place=place)
        return [WriteResult(_copied(result.lesson), result.action) for result in results]

    def _keep_cap(self, db: _Data, written: Lesson) -> None:
        """Drop what writing ``written`` pushes out of its pool (``LessonWriter.keep_cap``), under the lock."""
        self.writer.keep_cap(MemoryTx(self, db), written)

    def _near_duplicate(self, db: _Data, lesson: Lesson, threshold: float) -> Lesson | None:
        """The live lesson of the same kind this one nearly repeats, among the best by content BM25."""
        terms = keywords(lesson.content)[:64]
        if not terms:
            return None
        query = LessonQuery(lesson.namespace, kinds=[lesson.kind])
        found = self._search(db, query, terms, NEAR_DUPLICATE_POOL, content_only=True)
        return pick_near_duplicate(lesson.content, [db.lessons[c.lesson_id] for c in found], threshold)

    @staticmethod
    def _check_new_ids(db: _Data, lessons: Sequence[Lesson]) -> None:
        """Refuse, before anything is written, a lesson whose id another content already holds."""
        seen: dict[str, tuple[str, str]] = {}
        for lesson in lessons:
            identity = (lesson.namespace, lesson.content_hash)
            stored = db.lessons.get(lesson.id)
            check_id_free("lesson", lesson.id, lesson.namespace, stored.namespace if stored else None)
            held = (stored.namespace, stored.content_hash) if stored is not None else seen.get(lesson.id)
            if held is not None and held != identity:
                raise StoreError(f"lesson id {lesson.id} is already taken by another lesson")
            seen[lesson.id] = identity

    def _put(self, db: _Data, lesson: Lesson, old: Lesson | None) -> None:
        """Store ``lesson`` (replacing ``old``, same id) and index it."""
        row = db.spaces[old.namespace].remove(old) if old is not None else db.next_row()
        db.lessons[lesson.id] = lesson
        db.space(lesson.namespace).add(lesson, row)

    def _remove(self, db: _Data, lesson: Lesson) -> None:
        """Delete ``lesson``, its index entries and its vectors of every model."""
        db.spaces[lesson.namespace].remove(lesson)
        del db.lessons[lesson.id]
        for (ns, _), vectors in db.vectors.items():
            if ns == lesson.namespace:
                vectors.pop(lesson.id, None)

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]:
        """Bulk write in one step; the same content reinforces the stored lesson. Near duplicates are
        not looked for; an imported id already taken gets a fresh id."""
        prepared = [_copied(LessonWriter.prepared(lesson)) for lesson in lessons]
        added = 0
        with self._db() as db:
            tx = MemoryTx(self, db)
            for lesson in prepared:
                ns = lesson.namespace
                read = partial(tx.lookup, ns)
                decision = self.writer.decide(lesson, similar=None, duplicate_of=None, read=read)
                if decision.action == "reinforced":
                    self._put(db, decision.lesson, decision.previous)
                    continue
                if lesson.id in db.lessons:
                    lesson = lesson.model_copy(update={"id": new_id("les")})
                self._put(db, lesson, None)
                added += 1
        return added, len(prepared) - added

    def get_lessons(self, lesson_ids: Sequence[str], *, namespace: str | None = None) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        with self._db() as db:
            found = [db.lessons[i] for i in lesson_ids if i in db.lessons]
            return [_copied(x) for x in found if visible(namespace, x.namespace)]

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        check_sort(sort)
        with self._db() as db:
            space, now = db.spaces.get(query.namespace), self.clock()
            newest = reversed(space.docs) if space is not None else iter(())
            found = [db.lessons[i] for i in newest if passes(db.lessons[i], query, now)]
            return [_copied(x) for x in sort_lessons(found, sort)[offset : offset + limit]]

    def update_lesson(self, lesson: Lesson, *, audit: AuditEntry | None = None) -> Lesson:
        prepared = _copied(LessonWriter.prepared(lesson))
        with self._db() as db:
            old = db.lessons.get(prepared.id)
            if old is None or old.namespace != prepared.namespace:
                raise NotFoundError("lesson", prepared.id)
            holder = db.space(prepared.namespace).by_hash.get(prepared.content_hash)
            content_taken(holder, prepared)
            row = redact_audit(audit.of(old, prepared)) if audit is not None else None  # before any change
            self._put(db, prepared, old)
            self._keep_cap(db, prepared)
            db.audit += [row] if row is not None else []
            return _copied(prepared)

    def delete_lesson(self, namespace: str, lesson_id: str, *, audit: AuditEntry | None = None) -> bool:
        with self._db() as db:
            lesson = db.lessons.get(lesson_id)
            if lesson is None or lesson.namespace != namespace:
                return False
            row = redact_audit(audit.of(lesson, None)) if audit is not None else None
            self._remove(db, lesson)
            db.audit += [row] if row is not None else []
            return True

    def purge_expired(self, namespace: str) -> int:
        with self._db() as db:
            return MemoryTx(self, db).purge_expired(namespace)

    # ----------------------------------------------------------------- recall

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        with self._db() as db:
            return self._search(db, query, terms, limit)

    def _search(
        self, db: _Data, query: LessonQuery, terms: Sequence[str], limit: int, *, content_only: bool = False
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 that pass the filters; equal scores in write order, as FTS5
        returns them.

        Recall ranks by every query word, exactly. The near-duplicate check (``content_only``)
        bounds its work as SQLite's does: terms are taken rarest first while their postings fit
        ``POSTINGS_BUDGET``; when every word is more common than that, the newest lessons holding
        the rarest one are taken, all with the same relevance, newest first.
        """
        space = db.spaces.get(query.namespace)
        wanted = query_terms(terms)
        if space is None or not wanted or limit <= 0:
            return []
        postings = space.content_postings if content_only else space.postings
        frequencies = {term: len(postings.get(term, ())) for term in wanted}
        chosen, rarest = match_terms(wanted, frequencies, bounded=content_only)
        if rarest is None:
            return []
        docs = len(space.docs)
        scored: list[tuple[float, int, str]] = []
        if chosen:
            avg_len = space.length / max(1, docs)
            weights = {term: idf(docs, frequencies[term]) for term in chosen}
            for lesson_id in set().union(*(postings[term] for term in chosen)):
                doc = space.docs[lesson_id]
                held = doc.content if content_only else doc.terms
                factors = bm25_factors({t: held[t] for t in chosen if t in held}, doc.length, avg_len)
                score = sum(weights[term] * factor for term, factor in factors.items())
                scored.append((score, doc.row, lesson_id))
            scored.sort(key=lambda item: (-item[0], item[1]))
        else:
            flat = common_idf(docs, rarest[0])
            scored = [(flat, space.docs[i].row, i) for i in postings[rarest[1]]]
            scored = sorted(scored, key=lambda item: item[1], reverse=True)[:POSTINGS_BUDGET]
        out: list[Candidate] = []
        now = self.clock()
        for relevance, _, lesson_id in scored:
            lesson = db.lessons[lesson_id]
            if passes(lesson, query, now):
                out.append(_candidate(lesson, relevance))
                if len(out) >= limit:
                    break
        return out

    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        with self._db() as db:
            now = self.clock()
            found = (db.lessons.get(i) for i in dict.fromkeys(lesson_ids))
            return [_candidate(x, 0.0) for x in found if x is not None and passes(x, query, now)]

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        if not (helpful or harmful):
            return 0
        with self._db() as db:
            return self._credit(db, namespace, lesson_ids, helpful, harmful)

    @staticmethod
    def _credit(db: _Data, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int) -> int:
        count = 0
        for lesson_id in dict.fromkeys(lesson_ids):
            lesson = db.lessons.get(lesson_id)
            if lesson is not None and lesson.namespace == namespace:
                lesson.helpful += helpful
                lesson.harmful += harmful
                count += 1
        return count

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        with self._db() as db:
            now = from_timestamp(self.clock())
            for lesson_id in lesson_ids:  # each mention counts, as in the other stores
                lesson = db.lessons.get(lesson_id)
                if lesson is not None:
                    lesson.access_count += 1
                    lesson.last_accessed = now

    # ----------------------------------------------------------------- vectors

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        written = 0
        with self._db() as db:
            key = (namespace, model)
            for lesson_id, text_hash, vector in rows:
                lesson = db.lessons.get(lesson_id)
                if lesson is None or lesson.namespace != namespace:
                    continue
                seq = db.vector_seq[key] = db.vector_seq.get(key, 0) + 1
                vectors = db.vectors.setdefault(key, {})
                vectors.pop(lesson_id, None)  # moved to the end: the dict stays in write order
                vectors[lesson_id] = (text_hash, bytes(vector), seq)
                written += 1
        return written

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        with self._db() as db:
            vectors = db.vectors.get((namespace, model), {})
            return {i: vectors[i][0] for i in lesson_ids if i in vectors}

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        cut = VectorChanges.limit_of(limit)
        with self._db() as db:
            vectors = db.vectors.get((namespace, model), {})
            rows = sorted(
                ((i, vector, seq) for i, (_, vector, seq) in vectors.items() if seq > after),
                key=lambda r: r[2],
            )
            top = db.vector_seq.get((namespace, model), 0)
            return VectorChanges.page(rows if cut < 0 else rows[:cut], after, top, len(vectors), limit)

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        with self._db() as db:
            space = db.spaces.get(namespace)
            if space is None or limit <= 0:
                return []
            vectors = db.vectors.get((namespace, model), {})
            key = {i: (db.lessons[i].created_at, space.docs[i].row) for i in space.docs}
            cursor = key.get(after) if after is not None else None
            missing = [
                db.lessons[i] for i in space.docs if i not in vectors and (cursor is None or key[i] > cursor)
            ]
            missing.sort(key=lambda x: key[x.id])
            return [_copied(x) for x in missing[:limit]]

    def _finish_job(self, job_id: str, owner: str, result: JobResult) -> list[WriteResult]:
        """Write the job's result and mark it done, in one step; a lost lease writes nothing."""
        prepared = [_copied(LessonWriter.prepared(lesson)) for lesson in result.lessons]
        with self._db() as db:
            job = self._leased(db, job_id, owner)
            if result.reflection is not None and result.reflection.id in db.reflections:
                raise StoreError(f"reflection id {result.reflection.id} is already taken")
            written = self._write_all(db, prepared, result.place)
            reflection = result.reflection_of(written)
            if reflection is not None:
                db.reflections[reflection.id] = _copied(reflection)
            self._done(db, job, result.detail)
            return written

    # ----------------------------------------------------------------- retention

    def purge_old(self, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool = False) -> Purged:
        with self._db() as db:
            return purge_old(db, db.episodes, db.reflections, namespace, cutoffs, dry_run=dry_run)

    # ----------------------------------------------------------------- stats

    def stats(self, namespace: str) -> StoreStats:
        stats = StoreStats(namespace=namespace)
        with self._db() as db:
            stats.episodes = sum(1 for ns, _, _ in db.episodes.values() if ns == namespace)
            space = db.spaces.get(namespace)
            for lesson in (db.lessons[i] for i in (space.docs if space is not None else ())):
                if lesson.status == "active":
                    stats.lessons[lesson.kind] = stats.lessons.get(lesson.kind, 0) + 1
                by_status = stats.lessons_by_status
                by_status[lesson.status] = by_status.get(lesson.status, 0) + 1
            for reflection in db.reflections.values():
                if reflection.namespace == namespace:
                    stats.count_reflection(reflection)
            stats.jobs = count_jobs_in(db, [namespace])
        stats.total_spend()
        return stats


# --------------------------------------------------------------------- helpers


def _candidate(lesson: Lesson, relevance: float) -> Candidate:
    return Candidate(
        lesson.id,
        relevance,
        lesson.access_count,
        lesson.confidence,
        lesson.pinned,
        last_used(lesson),
        lesson.importance,
        lesson.helpful,
        lesson.harmful,
    )
