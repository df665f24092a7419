"""The PostgreSQL job queue: leases with ``FOR UPDATE SKIP LOCKED``, retries, dead letters.

Semantics are those of the SQLite queue (``lessonbank.jobs``). Invariants: a job is unique per
(namespace, dedupe_key); a lease is taken in one statement that skips rows other workers hold
locked, so two workers never lease the same job; only the worker holding a lease moves its job on.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from lessonbank.errors import NotFoundError, StoreError
from lessonbank.models import Job, from_timestamp
from lessonbank.stores.base import LeaseLostError, parse_owner, pid_alive
from lessonbank.stores.postgres_db import PostgresDatabase

DUE_SLACK_S = 0.001  # as in the SQLite queue: "now" is due even under a frozen clock

_JOB_COLUMNS = (
    "id, namespace, kind, episode_id, dedupe_key, status, attempts, max_attempts, run_after, "
    "lease_owner, lease_expires_at, last_error, detail, payload, created_at, updated_at, finished_at"
)


class PostgresJobQueue(PostgresDatabase):
    """Job methods of the PostgreSQL store."""

    def _insert_job(self, conn: Connection[Any], job: Job) -> bool:
        """Insert ``job``; False when its (namespace, dedupe_key) is already taken."""
        row = conn.execute(
            "INSERT INTO jobs (id, namespace, kind, episode_id, dedupe_key, status, attempts, max_attempts, "
            "run_after, detail, payload, created_at, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (namespace, dedupe_key) DO NOTHING RETURNING id",
            (
                job.id,
                job.namespace,
                job.kind,
                job.episode_id,
                job.dedupe_key,
                job.status,
                job.attempts,
                job.max_attempts,
                job.run_after.timestamp(),
                job.detail,
                Jsonb(job.payload),
                job.created_at.timestamp(),
                job.updated_at.timestamp(),
            ),
        ).fetchone()
        if row is not None:
            self._notify(conn, job.namespace)
        return row is not None

    def enqueue_job(self, job: Job) -> None:
        def run() -> None:
            with self._tx() as conn:
                if not self._insert_job(conn, job):
                    taken = conn.execute("SELECT 1 FROM jobs WHERE id = %s", (job.id,)).fetchone()
                    if taken is None:  # same dedupe key, another job: SQLite's unique constraint refuses it
                        raise_duplicate(job)

        self._run(run)

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        """Take the next runnable job: queued and due, or leased by a worker whose lease expired."""
        now = self.clock()
        scope, params = _namespace_clause(namespaces)

        def run() -> Job | None:
            with self._tx() as conn:
                self._expire_dead_local_leases(conn)
                cur = conn.cursor(row_factory=dict_row)
                row = cur.execute(
                    "UPDATE jobs SET status = 'leased', lease_owner = %s, lease_expires_at = %s, "
                    "attempts = attempts + 1, updated_at = %s, detail = NULL WHERE id = (SELECT id FROM jobs "
                    "WHERE ((status = 'queued' AND run_after <= %s) OR (status = 'leased' AND lease_expires_at <= %s)) "
                    f"{scope} ORDER BY run_after LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {_JOB_COLUMNS}",
                    (owner, now + lease_s, now, now + DUE_SLACK_S, now, *params),
                ).fetchone()
                if row is None:
                    return None
                job = _row_to_job(row)
                if job.attempts > job.max_attempts:
                    conn.execute(
                        "UPDATE jobs SET status = 'dead', finished_at = %s, lease_owner = NULL, last_error = %s "
                        "WHERE id = %s",
                        (
                            now,
                            "a worker lost the job on its last attempt "
                            f"(lease expired; last error: {job.last_error})",
                            job.id,
                        ),
                    )
                    return None
                return job

        result: Job | None = self._run(run)
        return result

    def _expire_dead_local_leases(self, conn: Connection[Any]) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host = socket.gethostname()
        owners = conn.execute("SELECT DISTINCT lease_owner FROM jobs WHERE status = 'leased'").fetchall()
        for (owner,) in owners:
            owner_host, pid = parse_owner(owner or "")
            if owner_host == host and pid is not None and not pid_alive(pid):
                conn.execute(
                    "UPDATE jobs SET lease_expires_at = 0 WHERE status = 'leased' AND lease_owner = %s",
                    (owner,),
                )

    def _check_lease(self, conn: Connection[Any], job_id: str, owner: str) -> None:
        row = conn.execute(
            "SELECT status, lease_owner FROM jobs WHERE id = %s FOR UPDATE", (job_id,)
        ).fetchone()
        if row is None or row[0] != "leased" or row[1] != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        now = self.clock()

        def run() -> Job:
            with self._tx() as conn:
                self._check_lease(conn, job_id, owner)
                if retry_at is None:
                    conn.execute(
                        "UPDATE jobs SET status = 'dead', last_error = %s, finished_at = %s, updated_at = %s, "
                        "lease_owner = NULL, lease_expires_at = NULL WHERE id = %s",
                        (error, now, now, job_id),
                    )
                else:
                    conn.execute(
                        "UPDATE jobs SET status = 'queued', last_error = %s, run_after = %s, updated_at = %s, "
                        "lease_owner = NULL, lease_expires_at = NULL WHERE id = %s",
                        (error, retry_at, now, job_id),
                    )
                    self._notify(conn, "")
                return self._job(conn, job_id)

        result: Job = self._run(run)
        return result

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, "queued", None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, "waiting", detail)

    def _give_back(self, job_id: str, owner: str, status: str, detail: str | None) -> None:
        def run() -> None:
            with self._tx() as conn:
                self._check_lease(conn, job_id, owner)
                conn.execute(
                    "UPDATE jobs SET status = %s, detail = coalesce(%s, detail), attempts = greatest(0, attempts - 1), "
                    "lease_owner = NULL, lease_expires_at = NULL, updated_at = %s WHERE id = %s",
                    (status, detail, self.clock(), job_id),
                )
                if status == "queued":
                    self._notify(conn, "")

        self._run(run)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        scope, params = _namespace_clause(namespaces)

        def run() -> int:
            with self._tx() as conn:
                count = conn.execute(
                    f"UPDATE jobs SET status = 'queued', detail = NULL, updated_at = %s WHERE status = 'waiting' {scope}",
                    (self.clock(), *params),
                ).rowcount
                if count:
                    self._notify(conn, "")
                return count

        result: int = self._run(run)
        return result

    def _job(self, conn: Connection[Any], job_id: str) -> Job:
        row = (
            conn.cursor(row_factory=dict_row)
            .execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,))
            .fetchone()
        )
        if row is None:
            raise NotFoundError("job", job_id)
        return _row_to_job(row)

    def get_job(self, job_id: str) -> Job:
        def run() -> Job:
            with self._conn() as conn:
                return self._job(conn, job_id)

        result: Job = self._run(run)
        return result

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        clauses: list[str] = ["true"]
        params: list[Any] = []
        if namespace is not None:
            clauses.append("namespace = %s")
            params.append(namespace)
        if statuses:
            clauses.append("status = ANY(%s)")
            params.append(list(statuses))

        def run() -> list[Job]:
            with self._conn() as conn:
                rows = (
                    conn.cursor(row_factory=dict_row)
                    .execute(
                        f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(clauses)} "
                        "ORDER BY created_at DESC LIMIT %s",
                        (*params, limit),
                    )
                    .fetchall()
                )
            return [_row_to_job(row) for row in rows]

        result: list[Job] = self._run(run)
        return result

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead and waiting jobs (all of the namespace, or the given ids) with a fresh attempt budget."""
        now = self.clock()
        query = (
            "UPDATE jobs SET status = 'queued', attempts = 0, run_after = %s, updated_at = %s, finished_at = NULL, "
            "detail = 'requeued by retry' WHERE namespace = %s AND status IN ('dead', 'waiting')"
        )
        params: list[Any] = [now, now, namespace]
        if job_ids is not None:
            query += " AND id = ANY(%s)"
            params.append(list(job_ids))

        def run() -> int:
            with self._tx() as conn:
                count = conn.execute(query, params).rowcount
                if count:
                    self._notify(conn, namespace)
                return count

        result: int = self._run(run)
        return result

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        def run() -> int:
            with self._tx() as conn:
                return conn.execute(
                    "DELETE FROM jobs WHERE namespace = %s AND status = ANY(%s)", (namespace, list(statuses))
                ).rowcount

        result: int = self._run(run)
        return result

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        scope, params = _namespace_clause(namespaces)

        def run() -> dict[str, int]:
            with self._conn() as conn:
                rows = conn.execute(
                    f"SELECT status, count(*) FROM jobs WHERE true {scope} GROUP BY status", params
                ).fetchall()
            return {row[0]: int(row[1]) for row in rows}

        result: dict[str, int] = self._run(run)
        return result

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""
        scope, params = _namespace_clause(namespaces)

        def run() -> float | None:
            with self._conn() as conn:
                row = conn.execute(
                    "SELECT min(CASE status WHEN 'queued' THEN run_after ELSE lease_expires_at END) FROM jobs "
                    f"WHERE status IN ('queued', 'leased') {scope}",
                    params,
                ).fetchone()
            return None if row is None or row[0] is None else float(row[0])

        result: float | None = self._run(run)
        return result


def raise_duplicate(job: Job) -> None:
    raise StoreError(
        f"a job with dedupe key {job.dedupe_key!r} already exists in namespace {job.namespace!r}"
    )


def _namespace_clause(namespaces: Sequence[str] | None) -> tuple[str, list[Any]]:
    if namespaces is None:
        return "", []
    return "AND namespace = ANY(%s)", [list(namespaces)]


def _row_to_job(row: dict[str, Any]) -> Job:
    data = dict(row)
    for key in ("run_after", "lease_expires_at", "created_at", "updated_at", "finished_at"):
        data[key] = from_timestamp(data[key])
    return Job.model_construct(**data)
