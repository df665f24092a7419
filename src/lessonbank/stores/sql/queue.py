"""The SQL job queue, one for SQLite and PostgreSQL: leases, retries, dead letters.

Semantics in :mod:`lessonbank.jobs`. Invariants: a job is unique per (namespace, dedupe_key);
a lease is taken in one statement inside one write transaction (SQLite serialises writers;
PostgreSQL skips rows other workers hold locked), so two workers never lease the same job;
only the worker holding a lease can move its job on. A job made runnable is announced through
the dialect (``NOTIFY`` on PostgreSQL).

Each transition is one SQL statement whose ``SET`` list, statuses and constants come from
:mod:`lessonbank.queueing` (its docstring names the statement that mirrors each function).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from lessonbank import queueing
from lessonbank.errors import LeaseLostError, NotFoundError, StoreError
from lessonbank.models import JOB_TEXT_MAX_CHARS, Job, JobStatus, from_timestamp, truncated
from lessonbank.scoping import check_id_free, visible
from lessonbank.stores.leases import parse_owner, pid_alive
from lessonbank.stores.sql.dialect import Connection, Dialect, question_marks

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
# Job statuses as SQL literals (constants of ours, never input).
QUEUED, WAITING, LEASED = (f"'{status}'" for status in (queueing.QUEUED, queueing.WAITING, queueing.LEASED))
RETRYABLE = ", ".join(f"'{status}'" for status in queueing.RETRYABLE)


def assignments(changes: queueing.Changes) -> tuple[str, list[Any]]:
    """A transition's changes as the ``SET`` list of an UPDATE and its parameters."""
    unknown = set(changes) - set(JOB_COLUMNS)
    if unknown:
        raise ValueError(f"not job columns: {sorted(unknown)}")
    return ", ".join(f"{column} = ?" for column in changes), list(changes.values())


class SQLJobQueue:
    """The durable job queue of an SQL store (both :class:`~lessonbank.ports.JobQueue` and
    :class:`~lessonbank.ports.JobAdmin`)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def insert(self, conn: Connection, job: Job) -> bool:
        """Insert ``job`` in the caller's transaction; False when its (namespace, dedupe_key) is taken."""
        return bool(self.insert_all(conn, [job]))

    def insert_all(self, conn: Connection, jobs: Sequence[Job]) -> set[str]:
        """Insert ``jobs`` (dedupe keys distinct) in the caller's transaction, in one statement; the
        ids of those inserted (a job whose (namespace, dedupe_key) is taken is not)."""
        if not jobs:
            return set()
        d = self.dialect
        rows = [
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
                d.json(job.payload),
                job.created_at.timestamp(),
                job.updated_at.timestamp(),
            )
            for job in jobs
        ]
        values = ", ".join([f"({question_marks(len(_INSERTED))})"] * len(rows))
        inserted = {
            str(row[0])
            for row in conn.execute(
                f"INSERT INTO jobs ({', '.join(_INSERTED)}) VALUES {values} "
                "ON CONFLICT (namespace, dedupe_key) DO NOTHING RETURNING id",
                [value for row in rows for value in row],
            ).fetchall()
        }
        for namespace in sorted({job.namespace for job in jobs if job.id in inserted}):
            d.notify(conn, namespace)
        return inserted

    def enqueue_job(self, job: Job) -> None:
        def run() -> None:
            with self.dialect.tx() as conn:
                holder = conn.execute("SELECT namespace FROM jobs WHERE id = ?", (job.id,)).fetchone()
                check_id_free("job", job.id, job.namespace, holder[0] if holder else None)
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
        scope, params = self._scope(namespaces)
        return self._lease(owner, lease_s, scope, params)

    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None:
        """Take that job if it is runnable."""
        return self._lease(owner, lease_s, "AND id = ?", [job_id])

    def _lease(self, owner: str, lease_s: float, scope: str, params: Sequence[Any]) -> Job | None:
        now = self.dialect.clock()
        lease, values = assignments(queueing.leasing(owner, now, lease_s))

        def run() -> Job | None:
            with self.dialect.tx() as conn:
                self._expire_dead_local_leases(conn)
                # queueing.runnable, then queueing.leased (attempts + 1) in one statement.
                row = conn.execute(
                    f"UPDATE jobs SET {lease}, attempts = attempts + 1 WHERE id = (SELECT id FROM jobs "
                    f"WHERE ((status = {QUEUED} AND run_after <= ?) OR (status = {LEASED} AND lease_expires_at <= ?)) "
                    f"{scope} ORDER BY run_after LIMIT 1{self.dialect.skip_locked}) RETURNING {_SELECT}",
                    (*values, now + queueing.DUE_SLACK_S, now, *params),
                ).fetchone()
                if row is None:
                    return None
                job = self._decode(row)
                if queueing.spent(job):
                    bury, more = assignments(queueing.burying(job, now))
                    conn.execute(f"UPDATE jobs SET {bury} WHERE id = ?", (*more, job.id))
                    return None
                return job

        return self.dialect.run(run)

    def _expire_dead_local_leases(self, conn: Connection) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host = socket.gethostname()
        owners = conn.execute(f"SELECT DISTINCT lease_owner FROM jobs WHERE status = {LEASED}").fetchall()
        expire, values = assignments(queueing.expiring())
        for (owner,) in owners:
            owner_host, pid = parse_owner(owner or "")
            if owner_host == host and pid is not None and not pid_alive(pid):
                conn.execute(
                    f"UPDATE jobs SET {expire} WHERE status = {LEASED} AND lease_owner = ?", (*values, owner)
                )

    def check_lease(self, conn: Connection, job_id: str, owner: str) -> None:
        """Raise :class:`LeaseLostError` unless ``owner`` still holds the job's lease (row locked)."""
        row = conn.execute(
            f"SELECT status, lease_owner FROM jobs WHERE id = ?{self.dialect.for_update}", (job_id,)
        ).fetchone()
        if row is None or row[0] != queueing.LEASED or row[1] != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")

    def mark_done(self, conn: Connection, job_id: str, detail: str, now: float) -> None:
        done, values = assignments(queueing.finishing(now, truncated(detail, JOB_TEXT_MAX_CHARS)))
        conn.execute(f"UPDATE jobs SET {done} WHERE id = ?", (*values, job_id))

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        changes = queueing.failing(self.dialect.clock(), truncated(error, JOB_TEXT_MAX_CHARS), retry_at)
        failed, values = assignments(changes)

        def run() -> Job:
            with self.dialect.tx() as conn:
                self.check_lease(conn, job_id, owner)
                conn.execute(f"UPDATE jobs SET {failed} WHERE id = ?", (*values, job_id))
                if changes["status"] == queueing.QUEUED:
                    self.dialect.notify(conn, "")
                return self._job(conn, job_id)

        return self.dialect.run(run)

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, queueing.QUEUED, None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, queueing.WAITING, detail)

    def _give_back(self, job_id: str, owner: str, status: JobStatus, detail: str | None) -> None:
        detail = None if detail is None else truncated(detail, JOB_TEXT_MAX_CHARS)

        def run() -> None:
            with self.dialect.tx() as conn:
                self.check_lease(conn, job_id, owner)
                back, values = assignments(queueing.giving_back(self.dialect.clock(), status, detail))
                conn.execute(
                    f"UPDATE jobs SET {back}, attempts = {self.dialect.greatest}(0, attempts - 1) WHERE id = ?",
                    (*values, job_id),
                )
                if status == queueing.QUEUED:
                    self.dialect.notify(conn, "")

        self.dialect.run(run)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        scope, params = self._scope(namespaces)

        def run() -> int:
            with self.dialect.tx() as conn:
                unpark, values = assignments(queueing.unparking(self.dialect.clock()))
                count = conn.execute(
                    f"UPDATE jobs SET {unpark} WHERE status = {WAITING} {scope}", (*values, *params)
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

    def get_job(self, job_id: str, *, namespace: str | None = None) -> Job:
        def run() -> Job:
            with self.dialect.read() as conn:
                return self._job(conn, job_id)

        job = self.dialect.run(run)
        if not visible(namespace, job.namespace):
            raise NotFoundError("job", job_id)
        return job

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
        retry, params = assignments(queueing.retrying(self.dialect.clock()))
        query = f"UPDATE jobs SET {retry} WHERE namespace = ? AND status IN ({RETRYABLE})"
        params.append(namespace)
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

    def namespaces(self) -> list[str]:
        def run() -> list[str]:
            with self.dialect.read() as conn:
                rows = conn.execute(
                    "SELECT namespace FROM episodes UNION SELECT namespace FROM lessons "
                    "UNION SELECT namespace FROM jobs ORDER BY 1"
                ).fetchall()
            return [str(row[0]) for row in rows]

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
                    f"SELECT min(CASE status WHEN {QUEUED} THEN run_after ELSE lease_expires_at END) FROM jobs "
                    f"WHERE status IN ({QUEUED}, {LEASED}) {scope}",
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
