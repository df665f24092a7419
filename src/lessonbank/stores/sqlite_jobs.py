"""The SQLite job queue: leases, retries, dead letters (semantics in ``lessonbank.jobs``).

Invariants: a job is unique per (namespace, dedupe_key); a lease is taken and given back
inside one write transaction; only the worker holding a lease can move its job on.
"""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Sequence
from typing import Any

from lessonbank.errors import NotFoundError
from lessonbank.models import Job, from_timestamp
from lessonbank.stores.base import LeaseLostError, parse_owner, pid_alive
from lessonbank.stores.sqlite_db import SQLiteDatabase

# Timestamps pass through datetime, which rounds to the microsecond (sometimes upwards): a job
# stamped "now" must be due "now" even under a frozen test clock, so due-ness allows this slack.
DUE_SLACK_S = 0.001


class SQLiteJobQueue(SQLiteDatabase):
    """Job methods of the SQLite store."""

    def _insert_job(self, conn: sqlite3.Connection, job: Job) -> None:
        conn.execute(
            "INSERT INTO jobs (id, namespace, kind, episode_id, dedupe_key, status, attempts, max_attempts, "
            "run_after, detail, payload, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                json.dumps(job.payload),
                job.created_at.timestamp(),
                job.updated_at.timestamp(),
            ),
        )

    def enqueue_job(self, job: Job) -> None:
        with self._tx() as conn:
            self._insert_job(conn, job)

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        """Take the next runnable job: queued and due, or leased by a worker whose lease expired."""
        now = self.clock()
        scope, params = _namespace_clause(namespaces)
        with self._tx() as conn:
            self._expire_dead_local_leases(conn)
            row = conn.execute(
                "UPDATE jobs SET status = 'leased', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1, "
                "updated_at = ?, detail = NULL WHERE id = (SELECT id FROM jobs WHERE "
                "((status = 'queued' AND run_after <= ?) OR (status = 'leased' AND lease_expires_at <= ?)) "
                f"{scope} ORDER BY run_after LIMIT 1) RETURNING *",
                (owner, now + lease_s, now, now + DUE_SLACK_S, now, *params),
            ).fetchone()
            if row is None:
                return None
            job = _row_to_job(row)
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

    def _expire_dead_local_leases(self, conn: sqlite3.Connection) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host = socket.gethostname()
        for (owner,) in conn.execute(
            "SELECT DISTINCT lease_owner FROM jobs WHERE status = 'leased'"
        ).fetchall():
            owner_host, pid = parse_owner(owner or "")
            if owner_host == host and pid is not None and not pid_alive(pid):
                conn.execute(
                    "UPDATE jobs SET lease_expires_at = 0 WHERE status = 'leased' AND lease_owner = ?",
                    (owner,),
                )

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        now = self.clock()
        with self._tx() as conn:
            self._check_lease(conn, job_id, owner)
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
            return _row_to_job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        with self._tx() as conn:
            self._check_lease(conn, job_id, owner)
            conn.execute(
                "UPDATE jobs SET status = 'queued', attempts = max(0, attempts - 1), lease_owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                (self.clock(), job_id),
            )

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        with self._tx() as conn:
            self._check_lease(conn, job_id, owner)
            conn.execute(
                "UPDATE jobs SET status = 'waiting', detail = ?, attempts = max(0, attempts - 1), lease_owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE id = ?",
                (detail, self.clock(), job_id),
            )

    def _check_lease(self, conn: sqlite3.Connection, job_id: str, owner: str) -> None:
        row = conn.execute("SELECT status, lease_owner FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or row["status"] != "leased" or row["lease_owner"] != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        scope, params = _namespace_clause(namespaces)
        with self._tx() as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET status = 'queued', detail = NULL, updated_at = ? "
                f"WHERE status = 'waiting' {scope}",
                (self.clock(), *params),
            )
            return cursor.rowcount

    def get_job(self, job_id: str) -> Job:
        row = self._conn().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError("job", job_id)
        return _row_to_job(row)

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        clauses, params = ["1"], []
        if namespace is not None:
            clauses.append("namespace = ?")
            params.append(namespace)
        if statuses:
            clauses.append(f"status IN ({','.join('?' * len(statuses))})")
            params.extend(statuses)
        rows = (
            self._conn()
            .execute(
                f"SELECT * FROM jobs WHERE {' AND '.join(clauses)} ORDER BY created_at DESC LIMIT ?",
                (*params, limit),
            )
            .fetchall()
        )
        return [_row_to_job(row) for row in rows]

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead and waiting jobs (all of the namespace, or the given ids) with a fresh attempt budget."""
        now = self.clock()
        sql = (
            "UPDATE jobs SET status = 'queued', attempts = 0, run_after = ?, updated_at = ?, finished_at = NULL, "
            "detail = 'requeued by retry' WHERE namespace = ? AND status IN ('dead', 'waiting')"
        )
        params: list[Any] = [now, now, namespace]
        if job_ids is not None:
            sql += f" AND id IN ({','.join('?' * len(job_ids))})"
            params.extend(job_ids)
        with self._tx() as conn:
            return conn.execute(sql, params).rowcount

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        with self._tx() as conn:
            return conn.execute(
                f"DELETE FROM jobs WHERE namespace = ? AND status IN ({','.join('?' * len(statuses))})",
                (namespace, *statuses),
            ).rowcount

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        scope, params = _namespace_clause(namespaces)
        rows = (
            self._conn()
            .execute(f"SELECT status, count(*) AS n FROM jobs WHERE 1 {scope} GROUP BY status", params)
            .fetchall()
        )
        return {row["status"]: row["n"] for row in rows}

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""
        scope, params = _namespace_clause(namespaces)
        row = (
            self._conn()
            .execute(
                "SELECT min(CASE status WHEN 'queued' THEN run_after ELSE lease_expires_at END) FROM jobs "
                f"WHERE status IN ('queued', 'leased') {scope}",
                params,
            )
            .fetchone()
        )
        return None if row[0] is None else float(row[0])

    # ----------------------------------------------------------------- stats


def _namespace_clause(namespaces: Sequence[str] | None) -> tuple[str, list[Any]]:
    if namespaces is None:
        return "", []
    return f"AND namespace IN ({','.join('?' * len(namespaces))})", list(namespaces)


def _row_to_job(row: sqlite3.Row) -> Job:
    data = dict(row)
    data["payload"] = json.loads(data["payload"])
    for key in ("run_after", "lease_expires_at", "created_at", "updated_at", "finished_at"):
        data[key] = from_timestamp(data[key])
    return Job.model_construct(**data)
