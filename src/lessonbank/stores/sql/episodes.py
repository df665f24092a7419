"""Recording episodes in SQL: one episode with its job, or a batch of them, in the caller's transaction.

Invariants:

- An episode, its job and the credit of the lessons injected for it are written in one
  transaction (the caller's); an episode id already stored is a repeat (a retried call): its
  stored decision is returned and nothing is written; an id another namespace holds is refused.
- A batch (:meth:`EpisodeWriter.write_all`, what group commit hands over) gives the same decisions
  as writing its episodes one after another. When none of its ids is stored and no id repeats
  inside it, it takes three statements whatever its size (which ids are stored and which jobs hold
  its dedupe keys, the new jobs, the episodes; two when every key is held, as for a repeated
  failure); otherwise its episodes are written in turn, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lessonbank.lessons import duplicate_decision, episode_credit
from lessonbank.models import Decision, Episode, Job
from lessonbank.scoping import check_id_free
from lessonbank.stores.sql.dialect import Connection, Dialect, question_marks
from lessonbank.stores.sql.queue import SQLJobQueue

EpisodeWrite = tuple[Episode, Decision, Job | None, bool]  # record_episode's arguments: (…, credit)


class EpisodeWriter:
    """Writes episodes (and their jobs and credit) on a connection in a transaction."""

    def __init__(self, dialect: Dialect, jobs: SQLJobQueue) -> None:
        self.dialect = dialect
        self.jobs = jobs

    def write_one(
        self, conn: Connection, episode: Episode, decision: Decision, job: Job | None, credit: bool
    ) -> Decision:
        d = self.dialect
        namespace = episode.namespace or "default"
        stored = conn.execute(
            f"SELECT namespace, decision FROM episodes WHERE id = ?{d.for_update}", (episode.id,)
        ).fetchone()
        if stored is not None:
            check_id_free("episode", episode.id, namespace, stored[0])
            return d.load_record(Decision, stored[1])
        final = decision
        if job is not None and not self.jobs.insert(conn, job):
            final = self._duplicate(conn, namespace, decision, job)
        self._insert(conn, [(episode, final)])
        self._credit(conn, episode, credit)
        return final

    def write_all(self, conn: Connection, items: Sequence[EpisodeWrite]) -> list[Decision]:
        ids = [episode.id for episode, *_ in items]
        # As written in turn: the first job of a dedupe key is inserted (unless a stored job holds
        # the key); every other episode with that key gets the holder's job, as a duplicate.
        firsts: dict[tuple[str, str], Job] = {}
        for _, _, job, _ in items:
            if job is not None:
                firsts.setdefault((job.namespace, job.dedupe_key), job)
        stored, holders = self._look_up(conn, ids, list(firsts)) if len(set(ids)) == len(ids) else (True, {})
        if stored:  # a repeat (or an id twice): each in turn, each deciding on what is stored
            return [self.write_one(conn, *item) for item in items]
        inserted = self.jobs.insert_all(conn, [job for key, job in firsts.items() if key not in holders])
        holders.update({key: job.id for key, job in firsts.items() if job.id in inserted})
        taken = [key for key in firsts if key not in holders]  # by another process since the look-up
        if taken:
            holders.update(self._holders(conn, taken))
        finals = [
            decision
            if job is None or job.id in inserted
            else duplicate_decision(decision, holders.get((job.namespace, job.dedupe_key)))
            for _, decision, job, _ in items
        ]
        self._insert(conn, [(episode, final) for (episode, *_), final in zip(items, finals, strict=True)])
        for episode, _, _, credit in items:
            self._credit(conn, episode, credit)
        return finals

    def _look_up(
        self, conn: Connection, ids: Sequence[str], keys: Sequence[tuple[str, str]]
    ) -> tuple[bool, dict[tuple[str, str], str]]:
        """Whether any of ``ids`` is stored, and the stored jobs holding these (namespace, dedupe key)
        pairs: one statement (one round trip to a server store) for both."""
        d = self.dialect
        where, params = d.in_list("id", ids)
        parts, values = [f"SELECT 0, namespace, id, id FROM episodes WHERE {where}"], list(params)
        for namespace in sorted({namespace for namespace, _ in keys}):
            where, params = d.in_list("dedupe_key", [k for n, k in keys if n == namespace])
            parts.append(f"SELECT 1, namespace, dedupe_key, id FROM jobs WHERE namespace = ? AND {where}")
            values += [namespace, *params]
        rows = conn.execute(" UNION ALL ".join(parts), values).fetchall()
        stored = any(kind == 0 for kind, *_ in rows)
        return stored, {(str(n), str(key)): str(job_id) for kind, n, key, job_id in rows if kind == 1}

    def _holders(self, conn: Connection, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The stored jobs holding these (namespace, dedupe key) pairs: one statement a namespace."""
        found: dict[tuple[str, str], str] = {}
        for namespace in sorted({namespace for namespace, _ in keys}):
            where, params = self.dialect.in_list("dedupe_key", [k for n, k in keys if n == namespace])
            rows = conn.execute(
                f"SELECT dedupe_key, id FROM jobs WHERE namespace = ? AND {where}", [namespace, *params]
            ).fetchall()
            found.update({(namespace, str(key)): str(job_id) for key, job_id in rows})
        return found

    def _duplicate(self, conn: Connection, namespace: str, decision: Decision, job: Job) -> Decision:
        """The decision of an episode whose job's dedupe key another job holds: that job's."""
        existing = conn.execute(
            "SELECT id FROM jobs WHERE namespace = ? AND dedupe_key = ?", (namespace, job.dedupe_key)
        ).fetchone()
        return duplicate_decision(decision, existing[0] if existing else None)

    def _insert(self, conn: Connection, rows: Sequence[tuple[Episode, Decision]]) -> None:
        d = self.dialect
        columns = d.episode_columns
        values: list[Any] = []
        for episode, final in rows:
            row = {
                "id": episode.id,
                "namespace": episode.namespace or "default",
                "created_at": episode.created_at.timestamp(),
                "status": episode.status,
                "task": episode.task,
                "task_type": episode.task_type,
                "agent": episode.agent,
                "goal_id": episode.goal_id,
                "loop_id": episode.loop_id,
                "data": d.dump_record(episode),
                "decision": d.dump_record(final),
            }
            values += [row[column] for column in columns]
        placeholders = ", ".join([f"({question_marks(len(columns))})"] * len(rows))
        conn.execute(f"INSERT INTO episodes ({', '.join(columns)}) VALUES {placeholders}", values)

    def _credit(self, conn: Connection, episode: Episode, credit: bool) -> None:
        helpful, harmful = episode_credit(episode) if credit and episode.context_ids else (0, 0)
        if helpful or harmful:
            self.dialect.credit(conn, episode.namespace or "default", episode.context_ids, helpful, harmful)
