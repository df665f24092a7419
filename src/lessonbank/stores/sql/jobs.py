"""The SQL job queue, one for SQLite and PostgreSQL: leases, retries, dead letters.

Semantics in :mod:`lessonbank.jobs`. Invariants: a job is unique per (namespace, dedupe_key);
a lease is taken in one statement inside one write transaction (SQLite serialises writers;
PostgreSQL skips rows other workers hold locked), so two workers never lease the same job;
only the worker holding a lease can move its job on. A job made runnable is announced through
the dialect (``NOTIFY`` on PostgreSQL).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from lessonbank.errors import LeaseLostError, NotFoundError, StoreError
from lessonbank.models import Job, from_timestamp
from lessonbank.stores.leases import parse_owner, pid_alive
from lessonbank.stores.sql.dialect import Connection, Dialect, question_marks

# Timestamps pass through datetime, which rounds to the microsecond (sometimes upwards): a job
# stamped "now" must be due "now" even under a frozen test clock, so due-ness allows this slack.
DUE_SLACK_S = 0.001

JOB_COLUMNS = (
    "id",
    "namespace",
    "kind",
    "episode_id",
    "dedupe_key",
    "status",
    "attempts",
    "max_attempts",
    "run_after",
    "lease_owner",
    "lease_expires_at",
    "last_error",
    "detail",
    "payload",
    "created_at",
    "updated_at",
    "finished_at",
)
_SELECT = ", ".join(JOB_COLUMNS)
_INSERTED = (*JOB_COLUMNS[:9], "detail", "payload", "created_at", "updated_at")


class SQLJobQueue:
    """The durable job queue of an SQL store (both :class:`~lessonbank.ports.JobQueue` and
    :class:`~lessonbank.ports.JobAdmin`)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def insert(self, conn: Connection, job: Job) -> bool:
        """Insert ``job`` in the caller's transaction; False when its (namespace, dedupe_key) is taken."""
        row = conn.execute(
            f"INSERT INTO jobs ({', '.join(_INSERTED)}) VALUES ({question_marks(len(_INSERTED))}) "
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
                self.dialect.json(job.payload),
                job.created_at.timestamp(),
                job.updated_at.timestamp(),
            ),
        ).fetchone()
        if row is not None:
            self.dialect.notify(conn, job.namespace)
        return row is not None

    def enqueue_job(self, job: Job) -> None:
        def run() -> None:
            with self.dialect.tx() as conn:
                if not self.insert(conn, job):
                    taken = conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job.id,)).fetchone()
                    if taken is None:  # the same dedupe key on another job
                        raise StoreError(
                            f"a job with dedupe key {job.dedupe_key!r} already exists in namespace "
                            f"{job.namespace!r}"
                        )

        self.dialect.run(run)

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        """Take the next runnable job: queued and due, or leased by a worker whose lease expired."""
        now = self.dialect.clock()
        scope, params = self._scope(namespaces)

        def run() -> Job | None:
            with self.dialect.tx() as conn:
                self._expire_dead_local_leases(conn)
                row = conn.execute(
                    "UPDATE jobs SET status = 'leased', lease_owner = ?, lease_expires_at = ?, "
                    "attempts = attempts + 1, updated_at = ?, detail = NULL WHERE id = (SELECT id FROM jobs "
                    "WHERE ((status = 'queued' AND run_after <= ?) OR (status = 'leased' AND lease_expires_at <= ?)) "
                    f"{scope} ORDER BY run_after LIMIT 1{self.dialect.skip_locked}) RETURNING {_SELECT}",
                    (owner, now + lease_s, now, now + DUE_SLACK_S, now, *params),
                ).fetchone()
                if row is None:
                    return None
                job = self._decode(row)
                if job.attempts > job.max_attempts:
                    conn.execute(
                        "UPDATE jobs SET status = 'dead', finished_at = ?, lease_owner = NULL, last_error = ? "
                        "WHERE id = ?",
                        (
                            now,
                            "a worker lost the job on its last attempt "
                            f"(lease expired; last error: {job.last_error})",
                            job.id,
                        ),
                    )
                    return None
                return job

        return self.dialect.run(run)

    def _expire_dead_local_leases(self, conn: Connection) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host = socket.gethostname()
        owners = conn.execute("SELECT DISTINCT lease_owner FROM jobs WHERE status = 'leased'").fetchall()
        for (owner,) in owners:
            owner_host, pid = parse_owner(owner or "")
            if owner_host == host and pid is not None and not pid_alive(pid):
                conn.execute(
                    "UPDATE jobs SET lease_expires_at = 0 WHERE status = 'leased' AND lease_owner = ?",
                    (owner,),
                )

    def check_lease(self, conn: Connection, job_id: str, owner: str) -> None:
        """Raise :class:`LeaseLostError` unless ``owner`` still holds the job's lease (row locked)."""
        row = conn.execute(
            f"SELECT status, lease_owner FROM jobs WHERE id = ?{self.dialect.for_update}", (job_id,)
        ).fetchone()
        if row is None or row[0] != "leased" or row[1] != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")

    def mark_done(self, conn: Connection, job_id: str, detail: str, now: float) -> None:
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = ?, updated_at = ?, lease_owner = NULL, "
            "lease_expires_at = NULL, detail = ? WHERE id = ?",
            (now, now, detail, job_id),
        )

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        now = self.dialect.clock()

        def run() -> Job:
            with self.dialect.tx() as conn:
                self.check_lease(conn, job_id, owner)
                if retry_at is None:
                    conn.execute(
                        "UPDATE jobs SET status = 'dead', last_error = ?, finished_at = ?, updated_at = ?, "
                        "lease_owner = NULL, lease_expires_at = NULL WHERE id = ?",
                        (error, now, now, job_id),
                    )
                else:
                    conn.execute(
                        "UPDATE jobs SET status = 'queued', last_error = ?, run_after = ?, updated_at = ?, "
                        "lease_owner = NULL, lease_expires_at = NULL WHERE id = ?",
                        (error, retry_at, now, job_id),
                    )
                    self.dialect.notify(conn, "")
                return self._job(conn, job_id)

        return self.dialect.run(run)

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, "queued", None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, "waiting", detail)

    def _give_back(self, job_id: str, owner: str, status: str, detail: str | None) -> None:
        def run() -> None:
            with self.dialect.tx() as conn:
                self.check_lease(conn, job_id, owner)
                conn.execute(
                    f"UPDATE jobs SET status = ?, detail = coalesce(?, detail), "
                    f"attempts = {self.dialect.greatest}(0, attempts - 1), lease_owner = NULL, "
                    "lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                    (status, detail, self.dialect.clock(), job_id),
                )
                if status == "queued":
                    self.dialect.notify(conn, "")

        self.dialect.run(run)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        scope, params = self._scope(namespaces)

        def run() -> int:
            with self.dialect.tx() as conn:
                count = conn.execute(
                    f"UPDATE jobs SET status = 'queued', detail = NULL, updated_at = ? WHERE status = 'waiting' {scope}",
                    (self.dialect.clock(), *params),
                ).rowcount
                if count:
                    self.dialect.notify(conn, "")
                return count

        return self.dialect.run(run)

    def _job(self, conn: Connection, job_id: str) -> Job:
        row = conn.execute(f"SELECT {_SELECT} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError("job", job_id)
        return self._decode(row)

    def get_job(self, job_id: str) -> Job:
        def run() -> Job:
            with self.dialect.read() as conn:
                return self._job(conn, job_id)

        return self.dialect.run(run)

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        clauses: list[str] = ["true"]
        params: list[Any] = []
        if namespace is not None:
            clauses.append("namespace = ?")
            params.append(namespace)
        if statuses:
            clause, more = self.dialect.in_list("status", statuses)
            clauses.append(clause)
            params.extend(more)

        def run() -> list[Job]:
            with self.dialect.read() as conn:
                rows = conn.execute(
                    f"SELECT {_SELECT} FROM jobs WHERE {' AND '.join(clauses)} ORDER BY created_at DESC LIMIT ?",
                    (*params, limit),
                ).fetchall()
            return [self._decode(row) for row in rows]

        return self.dialect.run(run)

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead and waiting jobs (all of the namespace, or the given ids) with a fresh attempt budget."""
        now = self.dialect.clock()
        query = (
            "UPDATE jobs SET status = 'queued', attempts = 0, run_after = ?, updated_at = ?, finished_at = NULL, "
            "detail = 'requeued by retry' WHERE namespace = ? AND status IN ('dead', 'waiting')"
        )
        params: list[Any] = [now, now, namespace]
        if job_ids is not None:
            clause, more = self.dialect.in_list("id", job_ids)
            query += f" AND {clause}"
            params.extend(more)

        def run() -> int:
            with self.dialect.tx() as conn:
                count = conn.execute(query, params).rowcount
                if count:
                    self.dialect.notify(conn, namespace)
                return count

        return self.dialect.run(run)

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        clause, params = self.dialect.in_list("status", statuses)

        def run() -> int:
            with self.dialect.tx() as conn:
                return conn.execute(
                    f"DELETE FROM jobs WHERE namespace = ? AND {clause}", (namespace, *params)
                ).rowcount

        return self.dialect.run(run)

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        scope, params = self._scope(namespaces)

        def run() -> dict[str, int]:
            with self.dialect.read() as conn:
                return self.counts(conn, scope, params)

        return self.dialect.run(run)

    @staticmethod
    def counts(conn: Connection, scope: str, params: Sequence[Any]) -> dict[str, int]:
        rows = conn.execute(f"SELECT status, count(*) FROM jobs WHERE true {scope} GROUP BY status", params)
        return {row[0]: int(row[1]) for row in rows.fetchall()}

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""
        scope, params = self._scope(namespaces)

        def run() -> float | None:
            with self.dialect.read() as conn:
                row = conn.execute(
                    "SELECT min(CASE status WHEN 'queued' THEN run_after ELSE lease_expires_at END) FROM jobs "
                    f"WHERE status IN ('queued', 'leased') {scope}",
                    params,
                ).fetchone()
            return None if row is None or row[0] is None else float(row[0])

        return self.dialect.run(run)

    def _scope(self, namespaces: Sequence[str] | None) -> tuple[str, list[Any]]:
        if namespaces is None:
            return "", []
        clause, params = self.dialect.in_list("namespace", namespaces)
        return f"AND {clause}", params

    def _decode(self, row: Sequence[Any]) -> Job:
        data = dict(zip(JOB_COLUMNS, row, strict=True))
        data["payload"] = self.dialect.load_json(data["payload"])
        for key in ("run_after", "lease_expires_at", "created_at", "updated_at", "finished_at"):
            data[key] = from_timestamp(data[key])
        return Job.model_construct(**data)
