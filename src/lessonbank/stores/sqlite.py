"""The embedded SQLite store: one file, no server, safe for several processes at once.

Connections, transactions and migrations live in ``sqlite_db.py``, the job queue in
``sqlite_jobs.py``; this module holds episodes, lessons and reflections. Invariants:

- An episode and its job, and a job's result and its completion, are each one transaction.
- ``lessons_fts`` (FTS5, porter stemming over content, tags and ``learned_from``, ranked by
  BM25 with ``FTS_COLUMN_WEIGHTS``), ``lesson_tags`` and ``lesson_vectors`` follow the
  ``lessons`` table through triggers, so they can never disagree with it.
- Vectors are plain BLOBs scanned by the caller's in-process index (no extension to load):
  ``lesson_vectors.seq`` (AUTOINCREMENT) orders their writes; SQLite serialises writers, so
  sequence numbers are committed in order.
- Each thread gets its own connection; times are stored as Unix seconds (UTC).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from lessonbank.errors import InputError, NotFoundError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection, VerificationResult, from_timestamp
from lessonbank.stores.base import (
    CONFIDENCE_STEP,
    NEAR_DUPLICATE_JACCARD,
    Candidate,
    LessonQuery,
    LessonSort,
    StoreStats,
    VectorChanges,
    WriteResult,
    episode_credit,
    pick_near_duplicate,
)
from lessonbank.stores.shared import reinforce_candidates
from lessonbank.stores.sqlite_db import Clock
from lessonbank.stores.sqlite_jobs import SQLiteJobQueue
from lessonbank.text import content_hash, keywords

_LESSON_COLUMNS = (
    "id, namespace, kind, content, content_hash, tags, task_type, agent, goal_id, trigger, importance, "
    "confidence, source, status, access_count, last_accessed, helpful, harmful, pinned, expires_at, "
    "supersedes, superseded_by, episode_id, reflection_id, created_at, updated_at, extra, learned_from"
)
_LESSON_PLACEHOLDERS = ",".join("?" * len(_LESSON_COLUMNS.split(",")))
_LESSON_EXTRA_FIELDS = ("situation", "mistake", "correction")
_SORTS: dict[str, str] = {
    "created": "l.created_at DESC",
    "access": "l.access_count DESC, l.created_at DESC",
    "confidence": "l.confidence DESC, l.created_at DESC",
    "utility": "(l.helpful + 1.0) / (l.helpful + l.harmful + 2.0) DESC, (l.helpful - l.harmful) DESC, l.created_at DESC",
    "score": "l.importance * (0.5 + l.confidence) DESC, l.created_at DESC",
}


# Insert a lesson, or reinforce the one with the same content: one more use, a little more
# confidence, the union of both tag lists (stored order first).
_UPSERT = (
    f"INSERT INTO lessons ({_LESSON_COLUMNS}) VALUES ({_LESSON_PLACEHOLDERS}) "
    "ON CONFLICT (namespace, content_hash) DO UPDATE SET access_count = access_count + 1, "
    "confidence = min(1.0, confidence + ?), updated_at = ?, tags = ("
    "SELECT json_group_array(value) FROM (SELECT value FROM json_each(lessons.tags) UNION ALL "
    "SELECT value FROM json_each(excluded.tags) WHERE value NOT IN (SELECT value FROM json_each(lessons.tags))))"
)

# Lexical recall reads at most about this many postings per query (see SQLiteStore._search).
POSTINGS_BUDGET = 1500
MAX_MATCH_TERMS = 12
CACHED_MIN_DF = 64
# BM25 weight of each lessons_fts column (content, tags, learned_from): where a lesson was learned
# counts, but less than what it says.
FTS_COLUMN_WEIGHTS = (1.0, 1.0, 0.5)
_RANK = "bm25(" + ", ".join(f"{weight!r}" for weight in FTS_COLUMN_WEIGHTS) + ")"
_CANDIDATE_COLUMNS = (
    "l.id, l.access_count, l.confidence, l.pinned, coalesce(l.last_accessed, l.created_at) AS used, "
    "l.importance, l.helpful, l.harmful"
)


def fts_query(terms: Sequence[str], column: str | None = None) -> str:
    """An FTS5 MATCH expression OR-ing the terms, each quoted so no term is read as syntax;
    limited to one column when ``column`` is given."""
    expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return f"{column} : ({expression})" if column else expression


class SQLiteStore(SQLiteJobQueue):
    """SQLite persistence of episodes, lessons, reflections and jobs (see the module docstring)."""

    def __init__(self, path: str | Path, *, clock: Clock = time.time, busy_timeout_s: float = 30.0) -> None:
        super().__init__(path, clock=clock, busy_timeout_s=busy_timeout_s)
        self._df_cache: dict[str, int] = {}
        self._df_size = 0

    # ----------------------------------------------------------------- episodes

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job, and credit the lessons injected for it (see the Store
        protocol), in one transaction; an id already stored is a repeat (a retried call): no-op."""
        namespace = episode.namespace or "default"
        helpful, harmful = episode_credit(episode) if credit and episode.context_ids else (0, 0)
        with self._tx() as conn:
            stored = conn.execute("SELECT decision FROM episodes WHERE id = ?", (episode.id,)).fetchone()
            if stored is not None:
                return Decision.model_validate_json(stored["decision"])
            if job is not None:
                existing = conn.execute(
                    "SELECT id FROM jobs WHERE namespace = ? AND dedupe_key = ?", (namespace, job.dedupe_key)
                ).fetchone()
                if existing:
                    decision = Decision(
                        reflect=False,
                        trigger=decision.trigger,
                        reflector=decision.reflector,
                        reason=f"duplicate: an identical episode is already reflected (job {existing['id']})",
                        job_id=existing["id"],
                    )
                    job = None
                else:
                    self._insert_job(conn, job)
            conn.execute(
                "INSERT INTO episodes (id, namespace, created_at, status, task, task_type, agent, goal_id, "
                "loop_id, data, decision) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    episode.id,
                    namespace,
                    episode.created_at.timestamp(),
                    episode.status,
                    episode.task,
                    episode.task_type,
                    episode.agent,
                    episode.goal_id,
                    episode.loop_id,
                    episode.model_dump_json(),
                    decision.model_dump_json(),
                ),
            )
            if helpful or harmful:
                self._credit(conn, namespace, episode.context_ids, helpful, harmful)
        return decision

    def get_episode(self, episode_id: str) -> tuple[Episode, Decision | None]:
        row = (
            self._conn().execute("SELECT data, decision FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        )
        if row is None:
            raise NotFoundError("episode", episode_id)
        decision = Decision.model_validate_json(row["decision"]) if row["decision"] else None
        return Episode.model_validate_json(row["data"]), decision

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        where, params = "namespace = ? AND created_at >= ?", [namespace, since]
        if agent is not None:
            where += " AND agent = ?"
            params.append(agent)
        rows = (
            self._conn()
            .execute(
                f"SELECT data, decision FROM episodes WHERE {where} ORDER BY created_at DESC LIMIT ?",
                (*params, limit),
            )
            .fetchall()
        )
        return [
            (
                _stored_episode(row["data"]),
                Decision.model_validate_json(row["decision"]) if row["decision"] else None,
            )
            for row in rows
        ]

    # ----------------------------------------------------------------- lessons

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        lesson = _hashed(lesson)
        similar = self._near_duplicate(self._conn(), lesson, threshold)
        with self._tx() as conn:
            return self._write_lesson(conn, lesson, similar, duplicate_of)

    def _near_duplicate(self, conn: sqlite3.Connection, lesson: Lesson, threshold: float) -> Lesson | None:
        """The stored lesson this one nearly repeats, searched outside any write transaction.

        Searching holds no lock, so writers are not kept waiting; the price is that two
        near duplicates written in the same instant by two processes may both be kept
        (exact duplicates never: the unique content hash guards those).
        """
        terms = keywords(lesson.content)[:64]
        if not terms:
            return None
        query = LessonQuery(lesson.namespace, kinds=[lesson.kind])
        found = self._search(conn, query, terms, 20, column="content")
        candidates = self._lessons_by_id(conn, [c.lesson_id for c in found])
        return pick_near_duplicate(lesson.content, candidates, threshold)

    def _write_lesson(
        self,
        conn: sqlite3.Connection,
        lesson: Lesson,
        similar: Lesson | None,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        """Reinforce the lesson with the same content, else ``duplicate_of`` if it is live, else the
        near duplicate if it still exists, else add (marking the lesson it supersedes). The lesson
        it supersedes is never the one reinforced: "never do X" replacing "do X" is no repeat."""
        similar, duplicate_of = reinforce_candidates(lesson, similar, duplicate_of)
        row = conn.execute(
            f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE namespace = ? AND content_hash = ?",
            (lesson.namespace, lesson.content_hash),
        ).fetchone()
        if row is None and duplicate_of is not None:
            row = conn.execute(
                f"SELECT {_LESSON_COLUMNS} FROM lessons l WHERE id = ? AND {_LIVE}",
                (duplicate_of, lesson.namespace, self.clock()),
            ).fetchone()
        if row is None and similar is not None:
            row = conn.execute(
                f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE id = ?", (similar.id,)
            ).fetchone()
        if row is not None:
            return WriteResult(self._reinforce(conn, _row_to_lesson(row), lesson.tags), "reinforced")
        self._insert_lesson(conn, lesson)
        if lesson.supersedes is not None and lesson.supersedes != lesson.id:
            conn.execute(
                f"UPDATE lessons AS l SET superseded_by = ?, updated_at = ? WHERE id = ? AND {_LIVE}",
                (lesson.id, self.clock(), lesson.supersedes, lesson.namespace, self.clock()),
            )
        return WriteResult(lesson, "added")

    def _reinforce(self, conn: sqlite3.Connection, lesson: Lesson, new_tags: Sequence[str]) -> Lesson:
        now = self.clock()
        tags = list(dict.fromkeys([*lesson.tags, *new_tags]))[:32]
        confidence = min(1.0, lesson.confidence + CONFIDENCE_STEP)
        conn.execute(
            "UPDATE lessons SET access_count = access_count + 1, confidence = ?, last_accessed = ?, "
            "updated_at = ?, tags = ? WHERE id = ?",
            (confidence, now, now, json.dumps(tags), lesson.id),
        )
        return lesson.model_copy(
            update={
                "access_count": lesson.access_count + 1,
                "confidence": confidence,
                "tags": tags,
                "last_accessed": from_timestamp(now),
                "updated_at": from_timestamp(now),
            }
        )

    def _insert_lesson(self, conn: sqlite3.Connection, lesson: Lesson) -> None:
        conn.execute(
            f"INSERT INTO lessons ({_LESSON_COLUMNS}) VALUES ({_LESSON_PLACEHOLDERS})", _lesson_params(lesson)
        )

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]:
        """Bulk write in one transaction; the same (normalised) content reinforces the stored lesson.

        One upsert statement runs for the whole batch. Near duplicates are not looked for here
        (that costs a search per lesson). An imported id already taken by other content gets a
        fresh id.
        """
        now = self.clock()
        rows: list[tuple[Any, ...]] = []
        repeats: list[tuple[Any, ...]] = []
        seen: set[tuple[str, str]] = set()
        for lesson in map(_hashed, lessons):
            row = (*_lesson_params(lesson), CONFIDENCE_STEP, now)
            key = (lesson.namespace, lesson.content_hash)
            # A repeat inside the batch must wait until its first copy is indexed: reinforcing a row
            # the index has not seen would hand FTS5 a delete for a row it does not hold.
            (repeats if key in seen else rows).append(row)
            seen.add(key)
        with self._tx() as conn:
            last = conn.execute("SELECT coalesce(max(rowid), 0) FROM lessons").fetchone()[0]
            conn.execute("SAVEPOINT bulk")
            conn.execute("INSERT INTO bulk_load (marker) VALUES (1)")
            try:
                conn.executemany(_UPSERT, rows)
            except sqlite3.IntegrityError:  # an id collision: go row by row, renaming the intruders
                conn.execute("ROLLBACK TO bulk")
                conn.execute("INSERT INTO bulk_load (marker) VALUES (1)")
                for row in rows:
                    try:
                        conn.execute(_UPSERT, row)
                    except sqlite3.IntegrityError:
                        fresh = Lesson.model_fields["id"].get_default(call_default_factory=True)
                        conn.execute(_UPSERT, (fresh, *row[1:]))
            # Index the new rows in one pass (the insert trigger stood aside); reinforced rows were
            # re-indexed by the update trigger.
            conn.execute(
                "INSERT INTO lessons_fts (rowid, content, tags, learned_from) "
                "SELECT rowid, content, tags, learned_from FROM lessons WHERE rowid > ?",
                (last,),
            )
            conn.execute(
                "INSERT INTO lesson_tags (lesson_rowid, tag) SELECT l.rowid, t.value FROM lessons l, "
                "json_each(l.tags) t WHERE l.rowid > ?",
                (last,),
            )
            conn.execute("DELETE FROM bulk_load")
            conn.executemany(_UPSERT, repeats)
            conn.execute("RELEASE bulk")
            added = conn.execute("SELECT count(*) FROM lessons WHERE rowid > ?", (last,)).fetchone()[0]
        return added, len(rows) + len(repeats) - added

    def get_lesson(self, lesson_id: str) -> Lesson:
        row = (
            self._conn()
            .execute(f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE id = ?", (lesson_id,))
            .fetchone()
        )
        if row is None:
            raise NotFoundError("lesson", lesson_id)
        return _row_to_lesson(row)

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        where, params = self._filters(query)
        order = _SORTS.get(sort)
        if order is None:
            raise InputError(f"unknown sort {sort!r}; use one of {', '.join(_SORTS)}", field="sort")
        rows = (
            self._conn()
            .execute(
                f"SELECT {_prefixed('l')} FROM lessons l WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                (*params, limit, offset),
            )
            .fetchall()
        )
        return [_row_to_lesson(row) for row in rows]

    def delete_lesson(self, namespace: str, lesson_id: str) -> bool:
        with self._tx() as conn:
            cursor = conn.execute(
                "DELETE FROM lessons WHERE id = ? AND namespace = ?", (lesson_id, namespace)
            )
            return cursor.rowcount > 0

    def update_lesson(self, lesson: Lesson) -> Lesson:
        lesson = _hashed(lesson)
        params = _lesson_params(lesson)
        columns = [c.strip() for c in _LESSON_COLUMNS.split(",")]
        assignments = ", ".join(f"{column} = ?" for column in columns[2:])
        try:
            with self._tx() as conn:
                cursor = conn.execute(
                    f"UPDATE lessons SET {assignments} WHERE id = ? AND namespace = ?",
                    (*params[2:], lesson.id, lesson.namespace),
                )
                if cursor.rowcount == 0:
                    raise NotFoundError("lesson", lesson.id)
        except sqlite3.IntegrityError:
            raise InputError(
                "another lesson of this kind already has this content; reinforce or delete that one instead",
                field="content",
            ) from None
        return lesson

    def purge_expired(self, namespace: str) -> int:
        with self._tx() as conn:
            cursor = conn.execute(
                "DELETE FROM lessons WHERE namespace = ? AND expires_at IS NOT NULL AND expires_at <= ?",
                (namespace, self.clock()),
            )
            return cursor.rowcount

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        return self._search(self._conn(), query, terms, limit)

    def _search(
        self,
        conn: sqlite3.Connection,
        query: LessonQuery,
        terms: Sequence[str],
        limit: int,
        *,
        column: str | None = None,
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 over the query's selective terms that pass the filters.

        BM25 costs FTS5 a few microseconds per matching row, so the work is bounded: terms are
        taken rarest first while their postings fit ``POSTINGS_BUDGET``; words found in more
        lessons than that act as stopwords (their IDF is small anyway). When every word of the
        query is that common, the newest lessons holding its rarest word are taken unranked,
        all with the same relevance, so use and recency order them. ``column`` limits matching
        to one column of the index (the near-duplicate check looks at content only).
        """
        frequencies = self._document_frequencies(conn, terms)
        ranked = sorted((df, term) for term, df in frequencies.items() if df > 0)
        if not ranked:
            return []
        chosen, postings = [], 0
        for df, term in ranked[:MAX_MATCH_TERMS]:
            if postings + df > POSTINGS_BUDGET:
                break
            chosen.append(term)
            postings += df
        where, params = self._filters(query)
        if chosen:
            rows = conn.execute(
                f"SELECT {_CANDIDATE_COLUMNS}, -m.rank FROM (SELECT rowid, rank FROM lessons_fts "
                "WHERE lessons_fts MATCH ? AND rank MATCH ?) m "
                f"JOIN lessons l ON l.rowid = m.rowid WHERE {where} ORDER BY m.rank LIMIT ?",
                (fts_query(chosen, column), _RANK, *params, limit),
            ).fetchall()
        else:
            size = max(1, self._df_size)
            idf = math.log(1.0 + (size - ranked[0][0] + 0.5) / (ranked[0][0] + 0.5))
            rows = conn.execute(
                f"SELECT {_CANDIDATE_COLUMNS}, ? FROM (SELECT rowid FROM lessons_fts WHERE lessons_fts MATCH ? "
                f"ORDER BY rowid DESC LIMIT ?) m JOIN lessons l ON l.rowid = m.rowid WHERE {where} LIMIT ?",
                (idf, fts_query([ranked[0][1]], column), POSTINGS_BUDGET, *params, limit),
            ).fetchall()
        return [_candidate(row, float(row[8])) for row in rows]

    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        if not lesson_ids:
            return []
        where, params = self._filters(query)
        # CROSS JOIN fixes the loop order: each id is looked up by the unique index, where the
        # planner left alone would walk the namespace index over every lesson.
        rows = (
            self._conn()
            .execute(
                f"SELECT {_CANDIDATE_COLUMNS} FROM json_each(?) j CROSS JOIN lessons l ON l.id = j.value "
                f"WHERE {where}",
                (json.dumps(list(lesson_ids)), *params),
            )
            .fetchall()
        )
        by_id = {row[0]: _candidate(row, 0.0) for row in rows}
        return [by_id[lesson_id] for lesson_id in dict.fromkeys(lesson_ids) if lesson_id in by_id]

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        if not lesson_ids or not (helpful or harmful):
            return 0
        with self._tx() as conn:
            return self._credit(conn, namespace, lesson_ids, helpful, harmful)

    def _credit(
        self, conn: sqlite3.Connection, namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> int:
        unique = list(dict.fromkeys(lesson_ids))
        # "+namespace" keeps the planner on the id index: by the namespace index it would walk
        # every lesson of the namespace, on the record() path.
        cursor = conn.execute(
            "UPDATE lessons SET helpful = helpful + ?, harmful = harmful + ? "
            f"WHERE id IN ({','.join('?' * len(unique))}) AND +namespace = ?",
            (helpful, harmful, *unique, namespace),
        )
        return cursor.rowcount

    # ----------------------------------------------------------------- vectors

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        if not rows:
            return 0
        written = 0
        with self._tx() as conn:
            for lesson_id, text_hash, vector in rows:
                row = conn.execute(
                    "SELECT rowid FROM lessons WHERE id = ? AND namespace = ?", (lesson_id, namespace)
                ).fetchone()
                if row is None:
                    continue
                # Delete then insert (not REPLACE, whose delete fires no trigger): AUTOINCREMENT
                # gives the new row a sequence number above every number ever handed out.
                conn.execute(
                    "DELETE FROM lesson_vectors WHERE lesson_rowid = ? AND model = ?", (row[0], model)
                )
                conn.execute(
                    "INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (row[0], namespace, model, text_hash, sqlite3.Binary(vector)),
                )
                written += 1
        return written

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        if not lesson_ids:
            return {}
        rows = (
            self._conn()
            .execute(
                "SELECT l.id, v.text_hash FROM json_each(?) j CROSS JOIN lessons l ON l.id = j.value "
                "CROSS JOIN lesson_vectors v ON v.lesson_rowid = l.rowid AND v.model = ? WHERE l.namespace = ?",
                (json.dumps(list(lesson_ids)), model, namespace),
            )
            .fetchall()
        )
        return {row[0]: row[1] for row in rows}

    def vector_changes(self, namespace: str, model: str, after: int) -> VectorChanges:
        conn = self._conn()
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")  # one snapshot: rows, sequence and count agree
        try:
            rows = conn.execute(
                "SELECT l.id, v.vector, v.seq FROM lesson_vectors v JOIN lessons l ON l.rowid = v.lesson_rowid "
                "WHERE v.namespace = ? AND v.model = ? AND v.seq > ? ORDER BY v.seq",
                (namespace, model, after),
            ).fetchall()
            top, count = conn.execute(
                "SELECT (SELECT coalesce(max(seq), 0) FROM lesson_vectors WHERE namespace = ? AND model = ?), "
                "(SELECT coalesce(max(n), 0) FROM vector_counts WHERE namespace = ? AND model = ?)",
                (namespace, model, namespace, model),
            ).fetchone()
        finally:
            if own:
                conn.execute("COMMIT")
        return VectorChanges(
            rows=[(row[0], bytes(row[1])) for row in rows], seq=max(after, int(top)), count=int(count)
        )

    def lessons_missing_vectors(self, namespace: str, model: str, limit: int) -> list[Lesson]:
        conn = self._conn()
        # Vectors go with their lessons: as many vectors as lessons means none is missing, and
        # counting is cheaper than walking every lesson to find that out.
        complete = conn.execute(
            "SELECT (SELECT count(*) FROM lessons WHERE namespace = ?) <= "
            "(SELECT coalesce(max(n), 0) FROM vector_counts WHERE namespace = ? AND model = ?)",
            (namespace, namespace, model),
        ).fetchone()[0]
        if complete or limit <= 0:
            return []
        rows = conn.execute(
            f"SELECT {_prefixed('l')} FROM lessons l WHERE l.namespace = ? AND NOT EXISTS "
            "(SELECT 1 FROM lesson_vectors v WHERE v.lesson_rowid = l.rowid AND v.model = ?) "
            "ORDER BY l.created_at, l.rowid LIMIT ?",
            (namespace, model, limit),
        ).fetchall()
        return [_row_to_lesson(row) for row in rows]

    def _document_frequencies(self, conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
        """How many lessons hold each term, capped just above the postings budget.

        Counting costs one step per posting, so only frequent terms are cached (rare ones are
        cheap, and their counts matter exactly); the cache is dropped when the bank grows 10 %.
        """
        size = conn.execute("SELECT coalesce(max(rowid), 0) FROM lessons").fetchone()[0]
        if size > self._df_size * 1.1 or size < self._df_size:
            self._df_cache.clear()
            self._df_size = size
        out: dict[str, int] = {}
        for term in terms:
            df = self._df_cache.get(term)
            if df is None:
                df = conn.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM lessons_fts WHERE lessons_fts MATCH ? LIMIT ?)",
                    (fts_query([term]), POSTINGS_BUDGET + 1),
                ).fetchone()[0]
                if df >= CACHED_MIN_DF:
                    self._df_cache[term] = df
            out[term] = df
        return out

    def get_lessons(self, lesson_ids: Sequence[str]) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        return self._lessons_by_id(self._conn(), lesson_ids)

    def _lessons_by_id(self, conn: sqlite3.Connection, lesson_ids: Sequence[str]) -> list[Lesson]:
        if not lesson_ids:
            return []
        rows = conn.execute(
            f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE id IN ({','.join('?' * len(lesson_ids))})",
            list(lesson_ids),
        ).fetchall()
        by_id = {row["id"]: _row_to_lesson(row) for row in rows}
        return [by_id[lesson_id] for lesson_id in lesson_ids if lesson_id in by_id]

    def _filters(self, query: LessonQuery) -> tuple[str, list[Any]]:
        clauses = ["l.namespace = ?"]
        params: list[Any] = [query.namespace]
        if query.statuses:
            clauses.append(f"l.status IN ({','.join('?' * len(query.statuses))})")
            params.extend(query.statuses)
        if query.kinds:
            clauses.append(f"l.kind IN ({','.join('?' * len(query.kinds))})")
            params.extend(query.kinds)
        for column in ("task_type", "agent", "goal_id"):
            value = getattr(query, column)
            if value is not None:
                clauses.append(f"l.{column} = ?")
                params.append(value)
        for tag in query.tags:
            clauses.append(
                "EXISTS (SELECT 1 FROM lesson_tags t WHERE t.tag = ? AND t.lesson_rowid = l.rowid)"
            )
            params.append(tag)
        clauses.append("l.superseded_by IS NULL")
        clauses.append("(l.expires_at IS NULL OR l.expires_at > ?)")
        params.append(self.clock())
        return " AND ".join(clauses), params

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        now = self.clock()
        with self._tx() as conn:
            conn.executemany(
                "UPDATE lessons SET access_count = access_count + 1, last_accessed = ? WHERE id = ?",
                [(now, lesson_id) for lesson_id in lesson_ids],
            )

    # ----------------------------------------------------------------- reflections

    def _insert_reflection(self, conn: sqlite3.Connection, reflection: Reflection) -> None:
        conn.execute(
            "INSERT INTO reflections (id, namespace, episode_id, job_id, reflector, trigger, status, model, "
            "tokens_in, tokens_out, cost_usd, created_at, data) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                reflection.id,
                reflection.namespace,
                reflection.episode_id,
                reflection.job_id,
                reflection.reflector,
                reflection.trigger,
                reflection.status,
                reflection.model,
                reflection.tokens_in,
                reflection.tokens_out,
                reflection.cost_usd,
                reflection.created_at.timestamp(),
                reflection.model_dump_json(),
            ),
        )

    def get_reflection(self, reflection_id: str) -> Reflection:
        row = self._conn().execute("SELECT data FROM reflections WHERE id = ?", (reflection_id,)).fetchone()
        if row is None:
            raise NotFoundError("reflection", reflection_id)
        return Reflection.model_validate_json(row["data"])

    def reflections_for_episode(self, episode_id: str) -> list[Reflection]:
        rows = (
            self._conn()
            .execute("SELECT data FROM reflections WHERE episode_id = ? ORDER BY created_at", (episode_id,))
            .fetchall()
        )
        return [Reflection.model_validate_json(row["data"]) for row in rows]

    def finish_job(
        self,
        job_id: str,
        owner: str,
        *,
        reflection: Reflection | None,
        lessons: Sequence[Lesson],
        detail: str,
        duplicate_of: Mapping[str, str] | None = None,
    ) -> list[WriteResult]:
        now = self.clock()
        hashed = [_hashed(lesson) for lesson in lessons]
        similar = [self._near_duplicate(self._conn(), lesson, NEAR_DUPLICATE_JACCARD) for lesson in hashed]
        twins = duplicate_of or {}
        with self._tx() as conn:
            self._check_lease(conn, job_id, owner)
            results = [
                self._write_lesson(conn, lesson, twin, twins.get(lesson.id))
                for lesson, twin in zip(hashed, similar, strict=True)
            ]
            if reflection is not None:
                reflection = reflection.model_copy(update={"lesson_ids": [r.lesson.id for r in results]})
                self._insert_reflection(conn, reflection)
            conn.execute(
                "UPDATE jobs SET status = 'done', finished_at = ?, updated_at = ?, lease_owner = NULL, "
                "lease_expires_at = NULL, detail = ? WHERE id = ?",
                (now, now, detail, job_id),
            )
        return results

    def stats(self, namespace: str) -> StoreStats:
        conn = self._conn()
        stats = StoreStats(namespace=namespace)
        stats.episodes = conn.execute(
            "SELECT count(*) FROM episodes WHERE namespace = ?", (namespace,)
        ).fetchone()[0]
        for row in conn.execute(
            "SELECT kind, status, count(*) AS n FROM lessons WHERE namespace = ? GROUP BY kind, status",
            (namespace,),
        ):
            if row["status"] == "active":
                stats.lessons[row["kind"]] = stats.lessons.get(row["kind"], 0) + row["n"]
            stats.lessons_by_status[row["status"]] = stats.lessons_by_status.get(row["status"], 0) + row["n"]
        for row in conn.execute(
            "SELECT status, count(*) AS n, sum(tokens_in) AS tin, sum(tokens_out) AS tout "
            "FROM reflections WHERE namespace = ? GROUP BY status",
            (namespace,),
        ):
            stats.reflections[row["status"]] = row["n"]
            stats.tokens_in += row["tin"] or 0
            stats.tokens_out += row["tout"] or 0
        spend = (
            "count(*) AS reflections, coalesce(sum(json_extract(data, '$.llm_calls')), 0) AS calls, "
            "coalesce(sum(tokens_in), 0) AS tokens_in, coalesce(sum(tokens_out), 0) AS tokens_out, "
            "coalesce(sum(cost_usd), 0.0) AS cost_usd, "
            "sum(CASE WHEN cost_usd IS NULL AND json_extract(data, '$.llm_calls') > 0 THEN 1 ELSE 0 END) "
            "AS unpriced_calls FROM reflections WHERE namespace = ?"
        )
        for key, target in (
            ("reflector", stats.by_reflector),
            ("date(created_at, 'unixepoch')", stats.by_day),
        ):
            for row in conn.execute(f"SELECT {key} AS k, {spend} GROUP BY k ORDER BY k", (namespace,)):
                target[row["k"]] = {name: row[name] for name in row.keys() if name != "k"}  # noqa: SIM118
        stats.llm_calls = int(sum(row["calls"] for row in stats.by_reflector.values()))
        stats.cost_usd = float(sum(row["cost_usd"] for row in stats.by_reflector.values()))
        stats.jobs = self.count_jobs([namespace])
        stats.size_bytes = sum(
            Path(self.path + suffix).stat().st_size
            for suffix in ("", "-wal")
            if Path(self.path + suffix).exists()
        )
        return stats


# --------------------------------------------------------------------- helpers

# A live lesson of a namespace (parameters: namespace, now): not superseded, not expired.
_LIVE = "l.namespace = ? AND l.superseded_by IS NULL AND (l.expires_at IS NULL OR l.expires_at > ?)"


def _candidate(row: sqlite3.Row, relevance: float) -> Candidate:
    return Candidate(
        row[0], relevance, row[1], row[2], bool(row[3]), row[4], float(row[5]), int(row[6]), int(row[7])
    )


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in _LESSON_COLUMNS.split(","))


def _ts(value: Any) -> float | None:
    return None if value is None else value.timestamp()


def _lesson_params(lesson: Lesson) -> tuple[Any, ...]:
    extra: dict[str, Any] = {
        name: getattr(lesson, name) for name in _LESSON_EXTRA_FIELDS if getattr(lesson, name) is not None
    }
    if lesson.metadata:
        extra["metadata"] = lesson.metadata
    return (
        lesson.id,
        lesson.namespace,
        lesson.kind,
        lesson.content,
        lesson.content_hash,
        json.dumps(lesson.tags),
        lesson.task_type,
        lesson.agent,
        lesson.goal_id,
        lesson.trigger,
        lesson.importance,
        lesson.confidence,
        lesson.source,
        lesson.status,
        lesson.access_count,
        _ts(lesson.last_accessed),
        lesson.helpful,
        lesson.harmful,
        int(lesson.pinned),
        _ts(lesson.expires_at),
        lesson.supersedes,
        lesson.superseded_by,
        lesson.episode_id,
        lesson.reflection_id,
        lesson.created_at.timestamp(),
        lesson.updated_at.timestamp(),
        json.dumps(extra),
        lesson.learned_from,
    )


def _hashed(lesson: Lesson) -> Lesson:
    return lesson.model_copy(
        update={"content_hash": content_hash(lesson.namespace, lesson.kind, lesson.content)}
    )


def _stored_episode(text: str) -> Episode:
    """An episode this store wrote: validated on the way in, so rebuilt without re-validation
    (the size and UTF-8 checks cost more than the policy's whole history read)."""
    data = json.loads(text)
    data["created_at"] = datetime.fromisoformat(data["created_at"])
    data["verification"] = [VerificationResult.model_construct(**v) for v in data.get("verification", [])]
    return Episode.model_construct(**data)


def _row_to_lesson(row: sqlite3.Row) -> Lesson:
    data = {key: row[key] for key in row.keys() if key not in ("extra", "rank")}  # noqa: SIM118
    data.update(json.loads(row["extra"]))
    data["tags"] = json.loads(data["tags"])
    data["pinned"] = bool(data["pinned"])
    for key in ("last_accessed", "expires_at", "created_at", "updated_at"):
        data[key] = from_timestamp(data[key])
    return Lesson.model_construct(**data)
