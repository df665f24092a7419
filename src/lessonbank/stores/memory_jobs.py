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

from lessonbank import queueing
from lessonbank.errors import LeaseLostError, NotFoundError, StoreError
from lessonbank.models import JOB_TEXT_MAX_CHARS, Job, JobStatus, truncated
from lessonbank.scoping import check_id_free, visible
from lessonbank.stores.leases import parse_owner, pid_alive


class JobTable:
    """A database's jobs (by id, in the order they were enqueued) and dedupe keys, under its lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.jobs: dict[str, Job] = {}
        self.dedupe: dict[tuple[str, str], str] = {}

    def namespaces(self) -> set[str]:
        """The namespaces holding a job (a database that holds more records adds theirs)."""
        return {job.namespace for job in self.jobs.values()}


def insert_job(db: JobTable, job: Job) -> None:
    """Add ``job`` (its dedupe key checked by the caller); a taken id fails before anything changes."""
    if job.id in db.jobs:
        check_id_free("job", job.id, job.namespace, db.jobs[job.id].namespace)
        raise StoreError(f"job id {job.id} is already taken")
    db.jobs[job.id] = job.model_copy(deep=True)
    db.dedupe[(job.namespace, job.dedupe_key)] = job.id


def count_jobs_in(db: JobTable, namespaces: Sequence[str] | None) -> dict[str, int]:
    counts: Counter[str] = Counter(job.status for job in db.jobs.values() if _in(job, namespaces))
    return {status: counts[status] for status in queueing.STATUSES if counts[status]}


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
        return self._lease(owner, lease_s, lambda job: _in(job, namespaces))

    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None:
        """Take that job if it is runnable."""
        return self._lease(owner, lease_s, lambda job: job.id == job_id)

    def _lease(self, owner: str, lease_s: float, wanted: Callable[[Job], bool]) -> Job | None:
        with self._db() as db:
            now = self.clock()
            self._expire_dead_local_leases(db)
            runnable = [
                (job.run_after.timestamp(), n, job)
                for n, job in enumerate(db.jobs.values())
                if wanted(job) and queueing.runnable(job, now)
            ]
            for _, _, job in sorted(runnable, key=lambda item: item[:2]):
                taken = queueing.take(job, owner, now, lease_s)
                db.jobs[job.id] = taken.job
                if taken.action == "leased":
                    return _copy(taken.job)
            return None

    @staticmethod
    def _expire_dead_local_leases(db: JobTable) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host, alive = socket.gethostname(), dict[int, bool]()
        for job in list(db.jobs.values()):
            if job.status != "leased":
                continue
            owner_host, pid = parse_owner(job.lease_owner or "")
            if owner_host != host or pid is None:
                continue
            if pid not in alive:
                alive[pid] = pid_alive(pid)
            if not alive[pid]:
                db.jobs[job.id] = queueing.apply(job, queueing.expiring())

    @staticmethod
    def _leased(db: JobTable, job_id: str, owner: str) -> Job:
        job = db.jobs.get(job_id)
        if job is None or job.status != "leased" or job.lease_owner != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")
        return job

    def _done(self, db: JobTable, job: Job, detail: str) -> None:
        """Mark the leased ``job`` done (the store writes its result in the same step)."""
        db.jobs[job.id] = queueing.done(job, self.clock(), truncated(detail, JOB_TEXT_MAX_CHARS))

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        with self._db() as db:
            job = self._leased(db, job_id, owner)
            error = truncated(error, JOB_TEXT_MAX_CHARS)
            failed = db.jobs[job_id] = queueing.failed(job, self.clock(), error, retry_at)
            return _copy(failed)

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, queueing.QUEUED, None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, queueing.WAITING, detail)

    def _give_back(self, job_id: str, owner: str, status: JobStatus, detail: str | None) -> None:
        with self._db() as db:
            job = self._leased(db, job_id, owner)
            short = None if detail is None else truncated(detail, JOB_TEXT_MAX_CHARS)
            db.jobs[job_id] = queueing.given_back(job, self.clock(), status, short)

    def namespaces(self) -> list[str]:
        with self._db() as db:
            return sorted(db.namespaces())

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""
        with self._db() as db:
            times: list[float] = []
            for job in db.jobs.values():
                if not _in(job, namespaces):
                    continue
                if job.status == queueing.QUEUED:
                    times.append(job.run_after.timestamp())
                elif job.status == queueing.LEASED and job.lease_expires_at is not None:
                    times.append(job.lease_expires_at.timestamp())
            return min(times, default=None)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        now = self.clock()
        with self._db() as db:
            waiting = [j for j in db.jobs.values() if j.status == queueing.WAITING and _in(j, namespaces)]
            for job in waiting:
                db.jobs[job.id] = queueing.unparked(job, now)
            return len(waiting)

    # ----------------------------------------------------------------- job admin

    def get_job(self, job_id: str, *, namespace: str | None = None) -> Job:
        with self._db() as db:
            job = db.jobs.get(job_id)
            if job is None or not visible(namespace, job.namespace):
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
        now = self.clock()
        wanted = set(job_ids) if job_ids is not None else None
        with self._db() as db:
            found = [
                job
                for job in db.jobs.values()
                if job.namespace == namespace
                and queueing.can_retry(job)
                and (wanted is None or job.id in wanted)
            ]
            for job in found:
                db.jobs[job.id] = queueing.retried(job, now)
            return len(found)

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
