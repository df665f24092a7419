"""The memory store's job queue (the JobQueue and JobAdmin ports), over its database's job table.

Semantics are the other queues': jobs are unique per (namespace, dedupe_key); a lease is taken,
and a leased job moved on, in one step under the database lock; only the worker holding a lease
can move its job on (else :class:`~lessonbank.errors.LeaseLostError`). Runnable jobs are
taken by due time (``run_after``), then in the order they were enqueued; a lease that expired by
the store clock is taken over, one held by a process of this host that no longer exists at once,
and one lost on the job's last attempt dead-letters the job.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from lessonbank.errors import LeaseLostError, NotFoundError, StoreError
from lessonbank.models import Job, from_timestamp
from lessonbank.stores.leases import parse_owner, pid_alive

DUE_SLACK_S = 0.001  # as in the other queues: a job stamped "now" is due under a frozen clock
JOB_STATUSES = ("queued", "waiting", "leased", "done", "dead")


class JobTable:
    """A database's jobs (by id, in the order they were enqueued) and dedupe keys, under its lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.jobs: dict[str, Job] = {}
        self.dedupe: dict[tuple[str, str], str] = {}


def insert_job(db: JobTable, job: Job) -> None:
    """Add ``job`` (its dedupe key checked by the caller); a taken id fails before anything changes."""
    if job.id in db.jobs:
        raise StoreError(f"job id {job.id} is already taken")
    db.jobs[job.id] = job.model_copy(deep=True)
    db.dedupe[(job.namespace, job.dedupe_key)] = job.id


def count_jobs_in(db: JobTable, namespaces: Sequence[str] | None) -> dict[str, int]:
    counts: Counter[str] = Counter(job.status for job in db.jobs.values() if _in(job, namespaces))
    return {status: counts[status] for status in JOB_STATUSES if counts[status]}


class MemoryJobQueue:
    """Job methods of the memory store; the store provides ``clock`` and its locked database."""

    clock: Callable[[], float]

    def _db(self) -> AbstractContextManager[JobTable]:
        raise NotImplementedError

    def enqueue_job(self, job: Job) -> None:
        with self._db() as db:
            if (job.namespace, job.dedupe_key) in db.dedupe:
                raise StoreError(
                    f"a job with dedupe key {job.dedupe_key!r} already exists in namespace {job.namespace!r}"
                )
            insert_job(db, job)

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        """Take the next runnable job, by due time: queued and due, or leased with an expired lease.
        A job whose lease was lost on its last attempt is dead-lettered and the next one taken."""
        with self._db() as db:
            now = self.clock()
            self._expire_dead_local_leases(db)
            runnable = [
                (job.run_after.timestamp(), n, job)
                for n, job in enumerate(db.jobs.values())
                if _in(job, namespaces)
                and (
                    (job.status == "queued" and job.run_after.timestamp() <= now + DUE_SLACK_S)
                    or (
                        job.status == "leased"
                        and job.lease_expires_at is not None
                        and job.lease_expires_at.timestamp() <= now
                    )
                )
            ]
            stamp = from_timestamp(now)
            for _, _, job in sorted(runnable, key=lambda item: item[:2]):
                if job.attempts + 1 > job.max_attempts:
                    db.jobs[job.id] = job.model_copy(
                        update={
                            "status": "dead",
                            "attempts": job.attempts + 1,
                            "finished_at": stamp,
                            "updated_at": stamp,
                            "lease_owner": None,
                            "lease_expires_at": None,
                            "last_error": "a worker lost the job on its last attempt "
                            f"(lease expired; last error: {job.last_error})",
                        }
                    )
                    continue
                leased = db.jobs[job.id] = job.model_copy(
                    update={
                        "status": "leased",
                        "lease_owner": owner,
                        "lease_expires_at": from_timestamp(now + lease_s),
                        "attempts": job.attempts + 1,
                        "updated_at": stamp,
                        "detail": None,
                    }
                )
                return _copy(leased)
            return None

    @staticmethod
    def _expire_dead_local_leases(db: JobTable) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host, alive = socket.gethostname(), dict[int, bool]()
        for job in db.jobs.values():
            if job.status != "leased":
                continue
            owner_host, pid = parse_owner(job.lease_owner or "")
            if owner_host != host or pid is None:
                continue
            if pid not in alive:
                alive[pid] = pid_alive(pid)
            if not alive[pid]:
                job.lease_expires_at = from_timestamp(0)

    @staticmethod
    def _leased(db: JobTable, job_id: str, owner: str) -> Job:
        job = db.jobs.get(job_id)
        if job is None or job.status != "leased" or job.lease_owner != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")
        return job

    def _done(self, db: JobTable, job: Job, detail: str) -> None:
        """Mark the leased ``job`` done (the store writes its result in the same step)."""
        now = from_timestamp(self.clock())
        update = {"status": "done", "finished_at": now, "updated_at": now, "detail": detail}
        db.jobs[job.id] = job.model_copy(update={**update, "lease_owner": None, "lease_expires_at": None})

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        with self._db() as db:
            job = self._leased(db, job_id, owner)
            now = from_timestamp(self.clock())
            update: dict[str, Any] = {
                "last_error": error,
                "updated_at": now,
                "lease_owner": None,
                "lease_expires_at": None,
            }
            if retry_at is None:
                update.update(status="dead", finished_at=now)
            else:
                update.update(status="queued", run_after=from_timestamp(retry_at))
            failed = db.jobs[job_id] = job.model_copy(update=update)
            return _copy(failed)

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, "queued", None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, "waiting", detail)

    def _give_back(self, job_id: str, owner: str, status: str, detail: str | None) -> None:
        with self._db() as db:
            job = self._leased(db, job_id, owner)
            db.jobs[job_id] = job.model_copy(
                update={
                    "status": status,
                    "detail": detail if detail is not None else job.detail,
                    "attempts": max(0, job.attempts - 1),
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "updated_at": from_timestamp(self.clock()),
                }
            )

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""
        with self._db() as db:
            times: list[float] = []
            for job in db.jobs.values():
                if not _in(job, namespaces):
                    continue
                if job.status == "queued":
                    times.append(job.run_after.timestamp())
                elif job.status == "leased" and job.lease_expires_at is not None:
                    times.append(job.lease_expires_at.timestamp())
            return min(times, default=None)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        update = {"status": "queued", "detail": None, "updated_at": from_timestamp(self.clock())}
        with self._db() as db:
            waiting = [j for j in db.jobs.values() if j.status == "waiting" and _in(j, namespaces)]
            return self._requeue(db, waiting, update)

    # ----------------------------------------------------------------- job admin

    def get_job(self, job_id: str) -> Job:
        with self._db() as db:
            job = db.jobs.get(job_id)
            if job is None:
                raise NotFoundError("job", job_id)
            return _copy(job)

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        with self._db() as db:
            found = [
                job
                for job in reversed(db.jobs.values())
                if (namespace is None or job.namespace == namespace)
                and (not statuses or job.status in statuses)
            ]
            found.sort(key=lambda job: job.created_at, reverse=True)  # stable: newest enqueued first on ties
            return [_copy(job) for job in found[: max(0, limit)]]

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead and waiting jobs (all of the namespace, or the given ids) with a fresh attempt budget."""
        now = from_timestamp(self.clock())
        update = {
            "status": "queued",
            "attempts": 0,
            "run_after": now,
            "updated_at": now,
            "finished_at": None,
            "detail": "requeued by retry",
        }
        wanted = set(job_ids) if job_ids is not None else None
        with self._db() as db:
            found = [
                job
                for job in db.jobs.values()
                if job.namespace == namespace
                and job.status in ("dead", "waiting")
                and (wanted is None or job.id in wanted)
            ]
            return self._requeue(db, found, update)

    @staticmethod
    def _requeue(db: JobTable, jobs: Sequence[Job], update: dict[str, Any]) -> int:
        for job in jobs:
            db.jobs[job.id] = job.model_copy(update=update)
        return len(jobs)

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        with self._db() as db:
            doomed = [j for j in db.jobs.values() if j.namespace == namespace and j.status in statuses]
            for job in doomed:
                del db.jobs[job.id]
                if db.dedupe.get((job.namespace, job.dedupe_key)) == job.id:
                    del db.dedupe[(job.namespace, job.dedupe_key)]
            return len(doomed)

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        with self._db() as db:
            return count_jobs_in(db, namespaces)


def _in(job: Job, namespaces: Sequence[str] | None) -> bool:
    return namespaces is None or job.namespace in namespaces


def _copy(job: Job) -> Job:
    return job.model_copy(deep=True)
