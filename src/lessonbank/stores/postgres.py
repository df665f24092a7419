"""The PostgreSQL store: many agents and many workers on one shared database.

``LessonBank("postgresql://127.0.0.1:5432/test")``; options in the URL query: ``schema``
(default ``public``), ``pool_min``/``pool_max`` (connection pool size, default 1/10),
``retry_s`` (how long connection errors are retried, default 15). Connections, migrations and
wake-ups live in ``postgres_db.py``, the job queue in ``postgres_jobs.py``. Invariants:

- Each record keeps its full JSON in ``data`` (JSONB); the other columns are copies kept for
  filtering, sorting and indexing, written in the same statement.
- A lesson is unique per (namespace, content_hash); writes follow the Store protocol's
  reinforce-instead-of-copy rule inside one transaction holding the row lock.
- Lexical recall: each lesson's tokens (:func:`lessonbank.stores.shared.index_terms`) sit in a
  ``tsvector`` with a GIN index; candidates are found through it within the postings budget
  and ranked with the same BM25 as the other stores.
- An episode and its job, and a job's result and its completion, are each one transaction.
- Vectors are plain ``bytea`` in ``lesson_vectors`` (no server extension: pgvector is not on
  users' servers); the caller's in-process index scans them. Writes of one (namespace, model)
  hold an advisory lock, so their sequence numbers are committed in order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import Connection, errors
from psycopg.types.json import Jsonb

from lessonbank.errors import NotFoundError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection, from_timestamp
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
from lessonbank.stores.postgres_db import Clock
from lessonbank.stores.postgres_index import (
    CANDIDATE_COLUMNS,
    COLUMNS,
    PLACEHOLDERS,
    SORTS,
    PostgresLessonIndex,
    candidate,
    values,
)
from lessonbank.stores.shared import (
    batched,
    check_sort,
    hashed,
    reinforce_candidates,
)
from lessonbank.text import keywords


class PostgresStore(PostgresLessonIndex):
    """PostgreSQL persistence of episodes, lessons, reflections and jobs (see the module docstring)."""

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        super().__init__(url, clock=clock)

    # ----------------------------------------------------------------- episodes

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job, and credit the lessons injected for it (see the Store
        protocol), in one transaction; an id already stored is a repeat (a retried call): no-op."""
        namespace = episode.namespace or "default"
        helpful, harmful = episode_credit(episode) if credit and episode.context_ids else (0, 0)

        def run() -> Decision:
            with self._tx() as conn:
                stored = conn.execute(
                    "SELECT decision FROM episodes WHERE id = %s FOR UPDATE", (episode.id,)
                ).fetchone()
                if stored is not None:
                    return Decision.model_validate(stored[0])
                final = decision
                if job is not None and not self._insert_job(conn, job):
                    existing = conn.execute(
                        "SELECT id FROM jobs WHERE namespace = %s AND dedupe_key = %s",
                        (namespace, job.dedupe_key),
                    ).fetchone()
                    job_id = existing[0] if existing else None
                    final = Decision(
                        reflect=False,
                        trigger=decision.trigger,
                        reflector=decision.reflector,
                        reason=f"duplicate: an identical episode is already reflected (job {job_id})",
                        job_id=job_id,
                    )
                conn.execute(
                    "INSERT INTO episodes (id, namespace, created_at, agent, data, decision) "
                    "VALUES (%s,%s,%s,%s,%s,%s)",
                    (
                        episode.id,
                        namespace,
                        episode.created_at.timestamp(),
                        episode.agent,
                        Jsonb(episode.model_dump(mode="json")),
                        Jsonb(final.model_dump(mode="json")),
                    ),
                )
                if helpful or harmful:
                    self._credit(conn, namespace, episode.context_ids, helpful, harmful)
                return final

        result: Decision = self._run(run)
        return result

    def get_episode(self, episode_id: str) -> tuple[Episode, Decision | None]:
        def run() -> Any:
            with self._conn() as conn:
                return conn.execute(
                    "SELECT data, decision FROM episodes WHERE id = %s", (episode_id,)
                ).fetchone()

        row = self._run(run)
        if row is None:
            raise NotFoundError("episode", episode_id)
        return _episode(row)

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        where, params = "namespace = %s AND created_at >= %s", [namespace, since]
        if agent is not None:
            where += " AND agent = %s"
            params.append(agent)

        def run() -> list[Any]:
            with self._conn() as conn:
                return conn.execute(
                    f"SELECT data, decision FROM episodes WHERE {where} ORDER BY created_at DESC LIMIT %s",
                    (*params, limit),
                ).fetchall()

        return [_episode(row) for row in self._run(run)]

    # ----------------------------------------------------------------- lessons

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        lesson = hashed(lesson)

        def run() -> WriteResult:
            similar = self._near_duplicate(lesson, threshold)
            with self._tx() as conn:
                return self._write_lesson(conn, lesson, similar, duplicate_of)

        result: WriteResult = self._run(run)
        return result

    def _near_duplicate(self, lesson: Lesson, threshold: float) -> Lesson | None:
        """The stored lesson this one nearly repeats, searched outside any write transaction."""
        terms = keywords(lesson.content)[:64]
        if not terms:
            return None
        with self._conn() as conn:
            found = self._search(conn, LessonQuery(lesson.namespace, kinds=[lesson.kind]), terms, 20)
            candidates = self._lessons_by_id(conn, [c.lesson_id for c in found])
        return pick_near_duplicate(lesson.content, candidates, threshold)

    def _write_lesson(
        self,
        conn: Connection[Any],
        lesson: Lesson,
        similar: Lesson | None,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        """Reinforce the lesson with the same content, else ``duplicate_of`` if it is live, else the
        near duplicate if it still exists, else add (marking the lesson it supersedes). The lesson
        it supersedes is never the one reinforced: "never do X" replacing "do X" is no repeat."""
        similar, duplicate_of = reinforce_candidates(lesson, similar, duplicate_of)
        for _ in range(3):
            row = conn.execute(
                "SELECT data FROM lessons WHERE namespace = %s AND content_hash = %s FOR UPDATE",
                (lesson.namespace, lesson.content_hash),
            ).fetchone()
            if row is None and duplicate_of is not None:
                row = conn.execute(
                    f"SELECT data FROM lessons l WHERE id = %s AND {_LIVE} FOR UPDATE",
                    (duplicate_of, lesson.namespace, self.clock()),
                ).fetchone()
            if row is None and similar is not None:
                row = conn.execute(
                    "SELECT data FROM lessons WHERE id = %s FOR UPDATE", (similar.id,)
                ).fetchone()
            if row is not None:
                stored = self._reinforced(Lesson.model_validate(row[0]), lesson.tags)
                self._overwrite(conn, stored)
                return WriteResult(stored, "reinforced")
            inserted = conn.execute(
                f"INSERT INTO lessons ({COLUMNS}) VALUES ({PLACEHOLDERS}) "
                "ON CONFLICT (namespace, content_hash) DO NOTHING RETURNING id",
                values(lesson, self._avg_len(lesson.namespace)),
            ).fetchone()
            if inserted is not None:
                self._corpus.pop(lesson.namespace, None)
                if lesson.supersedes is not None and lesson.supersedes != lesson.id:
                    self._supersede(conn, lesson)
                return WriteResult(lesson, "added")
            # Another writer added the same content in the meantime: reinforce theirs.
        raise NotFoundError("lesson", lesson.id)  # pragma: no cover - three lost races in a row

    def _supersede(self, conn: Connection[Any], lesson: Lesson) -> None:
        """Mark the live lesson ``lesson`` supersedes (kept, no longer recalled)."""
        now = self.clock()
        conn.execute(
            "UPDATE lessons l SET superseded_by = %s, data = data || jsonb_build_object("
            f"'superseded_by', %s::text, 'updated_at', %s::text) WHERE id = %s AND {_LIVE}",
            (
                lesson.id,
                lesson.id,
                from_timestamp(now).isoformat(),  # type: ignore[union-attr]
                lesson.supersedes,
                lesson.namespace,
                now,
            ),
        )

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
        """Bulk write, one transaction per thousand; the same content reinforces the stored lesson.

        Near duplicates are not looked for here. An imported id already taken by other content
        gets a fresh id.
        """
        added = reinforced = 0
        for chunk in batched([hashed(lesson) for lesson in lessons], 1000):

            def run(chunk: Sequence[Lesson] = chunk) -> tuple[int, int]:
                with self._tx() as conn:
                    return self._import_chunk(conn, chunk)

            a, r = self._run(run)
            added, reinforced = added + a, reinforced + r
        if added >= 1000:  # fresh statistics, or the planner keeps guessing for a while

            def analyze() -> None:
                with self._conn() as conn:
                    conn.execute("ANALYZE lessons")

            self._run(analyze)
        return added, reinforced

    def _import_chunk(self, conn: Connection[Any], chunk: Sequence[Lesson]) -> tuple[int, int]:
        namespaces = {lesson.namespace for lesson in chunk}
        stored: dict[tuple[str, str], Lesson] = {}
        for namespace in namespaces:
            rows = conn.execute(
                "SELECT data FROM lessons WHERE namespace = %s AND content_hash = ANY(%s) FOR UPDATE",
                (namespace, [lesson.content_hash for lesson in chunk if lesson.namespace == namespace]),
            ).fetchall()
            for (data,) in rows:
                found = Lesson.model_validate(data)
                stored[(found.namespace, found.content_hash)] = found
        taken = {
            row[0]
            for row in conn.execute(
                "SELECT id FROM lessons WHERE id = ANY(%s)", ([lesson.id for lesson in chunk],)
            ).fetchall()
        }
        new: list[Lesson] = []
        changed: dict[str, Lesson] = {}
        for lesson in chunk:
            key = (lesson.namespace, lesson.content_hash)
            if key in stored:
                stored[key] = self._reinforced(stored[key], lesson.tags)
                changed[stored[key].id] = stored[key]
                continue
            if lesson.id in taken:
                lesson = lesson.model_copy(
                    update={"id": Lesson.model_fields["id"].get_default(call_default_factory=True)}
                )
            taken.add(lesson.id)
            stored[key] = lesson
            new.append(lesson)
        new_ids = {lesson.id for lesson in new}
        final_new = [stored[(lesson.namespace, lesson.content_hash)] for lesson in new]
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO lessons ({COLUMNS}) VALUES ({PLACEHOLDERS})",
                [values(x, self._avg_len(x.namespace)) for x in final_new],
            )
        for lesson_id, lesson in changed.items():
            if lesson_id not in new_ids:
                self._overwrite(conn, lesson)
        for namespace in namespaces:
            self._corpus.pop(namespace, None)
        return len(new), len(chunk) - len(new)

    def get_lesson(self, lesson_id: str) -> Lesson:
        found = self.get_lessons([lesson_id])
        if not found:
            raise NotFoundError("lesson", lesson_id)
        return found[0]

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]:
        check_sort(sort)
        where, params = self._filters(query)

        def run() -> list[Any]:
            with self._conn() as conn:
                return conn.execute(
                    f"SELECT data FROM lessons l WHERE {where} ORDER BY {SORTS[sort]} LIMIT %s OFFSET %s",
                    (*params, limit, offset),
                ).fetchall()

        return [Lesson.model_validate(row[0]) for row in self._run(run)]

    def delete_lesson(self, namespace: str, lesson_id: str) -> bool:
        def run() -> bool:
            with self._tx() as conn:
                return (
                    conn.execute(
                        "DELETE FROM lessons WHERE id = %s AND namespace = %s", (lesson_id, namespace)
                    ).rowcount
                    > 0
                )

        self._corpus.pop(namespace, None)
        result: bool = self._run(run)
        return result

    def update_lesson(self, lesson: Lesson) -> Lesson:
        lesson = hashed(lesson)

        def run() -> int:
            with self._tx() as conn:
                return self._overwrite(conn, lesson)

        if not self._run(run):
            raise NotFoundError("lesson", lesson.id)
        self._corpus.pop(lesson.namespace, None)
        return lesson

    def purge_expired(self, namespace: str) -> int:
        def run() -> int:
            with self._tx() as conn:
                return conn.execute(
                    "DELETE FROM lessons WHERE namespace = %s AND expires_at IS NOT NULL AND expires_at <= %s",
                    (namespace, self.clock()),
                ).rowcount

        self._corpus.pop(namespace, None)
        result: int = self._run(run)
        return result

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]:
        def run() -> list[Candidate]:
            with self._conn() as conn:
                return self._search(conn, query, terms, limit)

        result: list[Candidate] = self._run(run)
        return result

    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        if not lesson_ids:
            return []
        where, params = self._filters(query)

        def run() -> list[Any]:
            with self._conn() as conn:
                return conn.execute(
                    f"SELECT {CANDIDATE_COLUMNS} FROM lessons l WHERE l.id = ANY(%s) AND {where}",
                    (list(lesson_ids), *params),
                ).fetchall()

        by_id = {row[0]: candidate(row, 0.0) for row in self._run(run)}
        return [by_id[lesson_id] for lesson_id in dict.fromkeys(lesson_ids) if lesson_id in by_id]

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        if not lesson_ids or not (helpful or harmful):
            return 0

        def run() -> int:
            with self._tx() as conn:
                return self._credit(conn, namespace, lesson_ids, helpful, harmful)

        result: int = self._run(run)
        return result

    @staticmethod
    def _credit(
        conn: Connection[Any], namespace: str, lesson_ids: Sequence[str], helpful: int, harmful: int
    ) -> int:
        # One statement: the row lock makes the additions atomic against any concurrent writer.
        return conn.execute(
            "UPDATE lessons SET helpful = helpful + %s, harmful = harmful + %s, data = data || "
            "jsonb_build_object('helpful', helpful + %s, 'harmful', harmful + %s) "
            "WHERE namespace = %s AND id = ANY(%s)",
            (helpful, harmful, helpful, harmful, namespace, list(dict.fromkeys(lesson_ids))),
        ).rowcount

    # ----------------------------------------------------------------- vectors

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        latest = {lesson_id: (text_hash, vector) for lesson_id, text_hash, vector in rows}
        if not latest:
            return 0
        ids = list(latest)
        hashes = [latest[i][0] for i in ids]
        vectors = [bytes(latest[i][1]) for i in ids]

        def run() -> int:
            for _ in range(3):
                try:
                    with self._tx() as conn:
                        # Writers of one (namespace, model) take turns, so sequence numbers are
                        # committed in the order they are drawn and readers miss none.
                        conn.execute(
                            "SELECT pg_advisory_xact_lock(hashtext(%s))",
                            (f"lessonbank:vectors:{self.schema}:{namespace}:{model}",),
                        )
                        return conn.execute(
                            "INSERT INTO lesson_vectors (lesson_id, model, namespace, text_hash, vector) "
                            "SELECT l.id, %s, l.namespace, r.h, r.v FROM unnest(%s::text[], %s::text[], "
                            "%s::bytea[]) AS r(id, h, v) JOIN lessons l ON l.id = r.id AND l.namespace = %s "
                            "ON CONFLICT (lesson_id, model) DO UPDATE SET text_hash = excluded.text_hash, "
                            "vector = excluded.vector, seq = excluded.seq",
                            (model, ids, hashes, vectors, namespace),
                        ).rowcount
                except errors.ForeignKeyViolation:
                    continue  # a lesson was deleted while this ran: the next pass skips it
            return 0  # pragma: no cover - lessons deleted under three passes in a row

        result: int = self._run(run)
        return result

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        if not lesson_ids:
            return {}

        def run() -> list[Any]:
            with self._conn() as conn:
                # By primary key only: with the namespace in the condition the planner, short of
                # fresh statistics, may walk the namespace's whole change index instead.
                return conn.execute(
                    "SELECT lesson_id, text_hash, namespace FROM lesson_vectors WHERE lesson_id = ANY(%s) "
                    "AND model = %s",
                    (list(lesson_ids), model),
                ).fetchall()

        return {row[0]: row[1] for row in self._run(run) if row[2] == namespace}

    def vector_changes(self, namespace: str, model: str, after: int) -> VectorChanges:
        def run() -> list[Any]:
            with self._conn() as conn:
                # One statement, one snapshot: the rows, the top sequence and the count agree.
                return conn.execute(
                    "WITH totals AS (SELECT (SELECT coalesce(max(seq), 0) FROM lesson_vectors WHERE "
                    "namespace = %s AND model = %s) AS top, (SELECT coalesce(max(n), 0) FROM vector_counts "
                    "WHERE namespace = %s AND model = %s) AS n) "
                    "SELECT t.top, t.n, v.lesson_id, v.vector FROM totals t LEFT JOIN lesson_vectors v "
                    "ON v.namespace = %s AND v.model = %s AND v.seq > %s ORDER BY v.seq",
                    (namespace, model, namespace, model, namespace, model, after),
                ).fetchall()

        found = self._run(run)
        top, count = (int(found[0][0]), int(found[0][1])) if found else (0, 0)
        rows = [(row[2], bytes(row[3])) for row in found if row[2] is not None]
        return VectorChanges(rows=rows, seq=max(after, top), count=count)

    def lessons_missing_vectors(self, namespace: str, model: str, limit: int) -> list[Lesson]:
        if limit <= 0:
            return []

        def run() -> list[Any]:
            with self._conn() as conn:
                # Vectors go with their lessons: as many vectors as lessons means none is missing.
                complete = conn.execute(
                    "SELECT (SELECT count(*) FROM lessons WHERE namespace = %s) <= "
                    "(SELECT coalesce(max(n), 0) FROM vector_counts WHERE namespace = %s AND model = %s)",
                    (namespace, namespace, model),
                ).fetchone()
                if complete is not None and complete[0]:
                    return []
                return conn.execute(
                    "SELECT data FROM lessons l WHERE namespace = %s AND NOT EXISTS (SELECT 1 FROM "
                    "lesson_vectors v WHERE v.lesson_id = l.id AND v.model = %s) "
                    "ORDER BY created_at, seq LIMIT %s",
                    (namespace, model, limit),
                ).fetchall()

        return [Lesson.model_validate(row[0]) for row in self._run(run)]

    def get_lessons(self, lesson_ids: Sequence[str]) -> list[Lesson]:
        """The lessons with these ids, in the order given (missing ids are left out)."""
        if not lesson_ids:
            return []

        def run() -> list[Lesson]:
            with self._conn() as conn:
                return self._lessons_by_id(conn, lesson_ids)

        result: list[Lesson] = self._run(run)
        return result

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None:
        if not lesson_ids:
            return
        now = self.clock()
        stamp = from_timestamp(now).isoformat()  # type: ignore[union-attr]

        def run() -> None:
            with self._tx() as conn:
                conn.execute(
                    "UPDATE lessons SET access_count = access_count + 1, last_used = %s, "
                    "data = data || jsonb_build_object('access_count', access_count + 1, 'last_accessed', %s::text) "
                    "WHERE id = ANY(%s)",
                    (now, stamp, list(lesson_ids)),
                )

        self._run(run)

    # ----------------------------------------------------------------- reflections

    def _insert_reflection(self, conn: Connection[Any], reflection: Reflection) -> None:
        conn.execute(
            "INSERT INTO reflections (id, namespace, episode_id, reflector, status, tokens_in, tokens_out, "
            "cost_usd, llm_calls, created_at, data) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (id) DO NOTHING",
            (
                reflection.id,
                reflection.namespace,
                reflection.episode_id,
                reflection.reflector,
                reflection.status,
                reflection.tokens_in,
                reflection.tokens_out,
                reflection.cost_usd,
                reflection.llm_calls,
                reflection.created_at.timestamp(),
                Jsonb(reflection.model_dump(mode="json")),
            ),
        )

    def get_reflection(self, reflection_id: str) -> Reflection:
        def run() -> Any:
            with self._conn() as conn:
                return conn.execute("SELECT data FROM reflections WHERE id = %s", (reflection_id,)).fetchone()

        row = self._run(run)
        if row is None:
            raise NotFoundError("reflection", reflection_id)
        return Reflection.model_validate(row[0])

    def reflections_for_episode(self, episode_id: str) -> list[Reflection]:
        def run() -> list[Any]:
            with self._conn() as conn:
                return conn.execute(
                    "SELECT data FROM reflections WHERE episode_id = %s ORDER BY created_at", (episode_id,)
                ).fetchall()

        return [Reflection.model_validate(row[0]) for row in self._run(run)]

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
        hashed_lessons = [hashed(lesson) for lesson in lessons]
        twins = duplicate_of or {}

        def run() -> list[WriteResult]:
            now = self.clock()
            similar = [self._near_duplicate(lesson, NEAR_DUPLICATE_JACCARD) for lesson in hashed_lessons]
            with self._tx() as conn:
                self._check_lease(conn, job_id, owner)
                results = [
                    self._write_lesson(conn, lesson, twin, twins.get(lesson.id))
                    for lesson, twin in zip(hashed_lessons, similar, strict=True)
                ]
                if reflection is not None:
                    done = reflection.model_copy(update={"lesson_ids": [r.lesson.id for r in results]})
                    self._insert_reflection(conn, done)
                conn.execute(
                    "UPDATE jobs SET status = 'done', finished_at = %s, updated_at = %s, lease_owner = NULL, "
                    "lease_expires_at = NULL, detail = %s WHERE id = %s",
                    (now, now, detail, job_id),
                )
                return results

        result: list[WriteResult] = self._run(run)
        return result

    def stats(self, namespace: str) -> StoreStats:
        def run() -> StoreStats:
            with self._conn() as conn:
                return self._stats(conn, namespace)

        result: StoreStats = self._run(run)
        return result

    def _stats(self, conn: Connection[Any], namespace: str) -> StoreStats:
        stats = StoreStats(namespace=namespace)
        row = conn.execute("SELECT count(*) FROM episodes WHERE namespace = %s", (namespace,)).fetchone()
        stats.episodes = int(row[0]) if row else 0
        for kind, status, n in conn.execute(
            "SELECT kind, status, count(*) FROM lessons WHERE namespace = %s GROUP BY kind, status",
            (namespace,),
        ).fetchall():
            if status == "active":
                stats.lessons[kind] = stats.lessons.get(kind, 0) + int(n)
            stats.lessons_by_status[status] = stats.lessons_by_status.get(status, 0) + int(n)
        for status, n, tin, tout in conn.execute(
            "SELECT status, count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) "
            "FROM reflections WHERE namespace = %s GROUP BY status",
            (namespace,),
        ).fetchall():
            stats.reflections[status] = int(n)
            stats.tokens_in += int(tin)
            stats.tokens_out += int(tout)
        spend = (
            "count(*), coalesce(sum(llm_calls), 0), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), "
            "coalesce(sum(cost_usd), 0.0), sum(CASE WHEN cost_usd IS NULL AND llm_calls > 0 THEN 1 ELSE 0 END) "
            "FROM reflections WHERE namespace = %s"
        )
        day = "to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
        for key, target in (("reflector", stats.by_reflector), (day, stats.by_day)):
            for k, n, calls, tin, tout, cost, unpriced in conn.execute(
                f"SELECT {key} AS k, {spend} GROUP BY k ORDER BY k",
                (namespace,),
            ).fetchall():
                target[k] = {
                    "reflections": int(n),
                    "calls": int(calls),
                    "tokens_in": int(tin),
                    "tokens_out": int(tout),
                    "cost_usd": float(cost),
                    "unpriced_calls": int(unpriced or 0),
                }
        stats.llm_calls = int(sum(r["calls"] for r in stats.by_reflector.values()))
        stats.cost_usd = float(sum(r["cost_usd"] for r in stats.by_reflector.values()))
        job_rows = conn.execute(
            "SELECT status, count(*) FROM jobs WHERE namespace = %s GROUP BY status", (namespace,)
        ).fetchall()
        stats.jobs = {status: int(n) for status, n in job_rows}
        size = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (self.schema,),
        ).fetchone()
        stats.size_bytes = int(size[0]) if size and size[0] is not None else None
        return stats


# --------------------------------------------------------------------- helpers

# A live lesson of a namespace (parameters: namespace, now): not superseded, not expired.
_LIVE = "l.namespace = %s AND l.superseded_by IS NULL AND (l.expires_at IS NULL OR l.expires_at > %s)"


def _episode(row: Sequence[Any]) -> tuple[Episode, Decision | None]:
    return Episode.model_validate(row[0]), Decision.model_validate(row[1]) if row[1] else None
