"""The Redis job queue: a stream per namespace with the consumer group ``workers``.

Semantics are those of the SQLite queue (``lessonbank.jobs``); every state transition is taken
from :mod:`lessonbank.queueing`. The job hash (``data`` = the
Job JSON) is the source of truth; the stream only delivers. Invariants:

- A runnable job has exactly one stream entry; a job due later waits in ``delayed`` (a zset by
  due time) and is moved onto the stream once due by a Lua script (so never twice).
- Leasing reads an entry with XREADGROUP, then moves the job from ``queued`` to ``leased`` in
  a WATCHed transaction: two workers never lease the same job. An entry whose job is no longer
  queued (purged, already done) is acknowledged and dropped.
- A lease that expired (by the store clock, ``leases`` zset) is taken over; entries a dead
  consumer left pending longer than the lease are reclaimed with XAUTOCLAIM. The job leaves
  the pending list (XACK + XDEL) in the same transaction that finishes, fails or returns it.
- Jobs are unique per (namespace, dedupe_key).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from functools import partial

from redis.exceptions import ResponseError

from lessonbank import queueing
from lessonbank.errors import LeaseLostError, NotFoundError, StoreError
from lessonbank.models import JOB_TEXT_MAX_CHARS, Job, JobStatus, truncated
from lessonbank.scoping import check_id_free, visible
from lessonbank.stores.leases import parse_owner, pid_alive
from lessonbank.stores.redis.db import GROUP, Pipe, RedisDatabase

# Move due jobs from the delayed zset onto the stream, atomically (no job is moved twice).
_PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('XADD', KEYS[2], '*', 'job', id)
end
return #due
"""


class RedisJobQueue:
    """The job queue of a Redis store: the JobQueue and JobAdmin ports over one database."""

    def __init__(self, db: RedisDatabase) -> None:
        self.db = db
        self._promote = db.r.register_script(_PROMOTE)
        self._consumers_checked: dict[str, float] = {}

    # ----------------------------------------------------------------- writing jobs

    def _job_key(self, job: Job) -> str:
        return self.db.k(job.namespace, "job", job.id)

    def read_job(self, pipe: Pipe, namespace: str, job_id: str) -> tuple[Job | None, str]:
        """The job and its stream entry id, WATCHing its hash."""
        key = self.db.k(namespace, "job", job_id)
        pipe.watch(key)
        data, entry = pipe.hmget(key, ["data", "entry"])
        return (Job.model_validate_json(data) if data else None), entry or ""

    def q_save_job(self, pipe: Pipe, job: Job, old_status: str | None, *, entry: str | None = None) -> None:
        """Queue the writes that store ``job`` and move it between status sets and schedules."""
        ns = job.namespace
        fields = {"data": job.model_dump_json()}
        if entry is not None:
            fields["entry"] = entry
        pipe.hset(self._job_key(job), mapping=fields)
        if old_status != job.status:
            if old_status is not None:
                pipe.srem(self.db.k(ns, "jobs", old_status), job.id)
            pipe.sadd(self.db.k(ns, "jobs", job.status), job.id)
        if job.status == queueing.LEASED and job.lease_expires_at is not None:
            pipe.zadd(self.db.k(ns, "leases"), {job.id: job.lease_expires_at.timestamp()})
        else:
            pipe.zrem(self.db.k(ns, "leases"), job.id)

    def _q_schedule(self, pipe: Pipe, job: Job) -> None:
        """Queue a queued job onto the stream when due, else into ``delayed``."""
        if queueing.due(job, self.db.clock()):
            pipe.xadd(self.db.k(job.namespace, "stream"), {"job": job.id})
        else:
            pipe.zadd(self.db.k(job.namespace, "delayed"), {job.id: job.run_after.timestamp()})

    def q_unstream(self, pipe: Pipe, job: Job, entry: str) -> None:
        """Queue the acknowledgement and removal of the job's stream entry."""
        if entry:
            stream = self.db.k(job.namespace, "stream")
            pipe.xack(stream, GROUP, entry)
            pipe.xdel(stream, entry)

    def q_insert_job(self, pipe: Pipe, job: Job) -> None:
        ns = job.namespace
        self.db.ensure_group(ns)
        self.q_save_job(pipe, job, None, entry="")
        pipe.set(self.db.k(ns, "dedupe", job.dedupe_key), job.id)
        pipe.zadd(self.db.k(ns, "jobs"), {job.id: job.created_at.timestamp()})
        pipe.hsetnx(self.db.where_key, job.id, ns)  # never moves another namespace's id
        pipe.sadd(self.db.namespaces_key, ns)
        if job.status == queueing.QUEUED:
            self._q_schedule(pipe, job)

    def enqueue_job(self, job: Job) -> None:
        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            dedupe = self.db.k(job.namespace, "dedupe", job.dedupe_key)
            pipe.watch(dedupe)
            check_id_free("job", job.id, job.namespace, pipe.hget(self.db.where_key, job.id))
            if pipe.get(dedupe) is not None:
                raise StoreError(
                    f"a job with dedupe key {job.dedupe_key!r} already exists in namespace {job.namespace!r}"
                )
            return lambda p: self.q_insert_job(p, job)

        self.db.transact(plan)

    # ----------------------------------------------------------------- leasing

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        """Take the next runnable job: an expired lease first, then the oldest stream entry."""

        def run() -> Job | None:
            for ns in namespaces if namespaces is not None else self.db.all_namespaces():
                job = self._lease_in(ns, owner, lease_s)
                if job is not None:
                    return job
            return None

        return self.db.run(run)

    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None:
        """Take that job if it is runnable. A queued job is taken without its stream entry: the
        reader that meets the entry later finds the job no longer queued and drops it."""

        def run() -> Job | None:
            ns = self.db.namespace_of(job_id)
            data = self.db.r.hget(self.db.k(ns, "job", job_id), "data") if ns is not None else None
            if ns is None or not data:
                return None
            job = Job.model_validate_json(data)
            if job.status == queueing.QUEUED and queueing.due(job, self.db.clock()):
                return self._take(ns, job_id, owner, lease_s, entry="")
            return self._take(ns, job_id, owner, lease_s, entry=None)  # an expired lease, else None

        return self.db.run(run)

    def _lease_in(self, ns: str, owner: str, lease_s: float) -> Job | None:
        stream = self.db.ensure_group(ns)
        now = self.db.clock()
        self._promote(keys=[self.db.k(ns, "delayed"), stream], args=[now + queueing.DUE_SLACK_S])
        self._expire_dead_local_leases(ns)
        for job_id in self.db.r.zrangebyscore(self.db.k(ns, "leases"), "-inf", now, start=0, num=5):
            job = self._take(ns, str(job_id), owner, lease_s, entry=None)
            if job is not None:
                return job
        job = self._reclaim_from_dead_local_consumers(ns, stream, owner, lease_s)
        if job is not None:
            return job
        # Entries a vanished consumer left pending for longer than a lease: claim them, then let the
        # job hash decide (its lease is checked against the store clock like any other).
        claimed = self.db.r.xautoclaim(
            stream, GROUP, owner, max(1, int(lease_s * 1000)), "0-0", count=5, justid=True
        )
        for entry in claimed:
            job = self._take_entry(ns, stream, str(entry), owner, lease_s)
            if job is not None:
                return job
        for _ in range(20):  # skip stale entries (jobs purged or already moved on)
            try:
                reply = self.db.r.xreadgroup(GROUP, owner, {stream: ">"}, count=1)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self.db._groups.discard(stream)
                self.db.ensure_group(ns)
                continue
            if not reply:
                return None
            entry, fields = reply[0][1][0]
            job = self._take(ns, fields.get("job", ""), owner, lease_s, entry=entry)
            if job is not None:
                return job
        return None

    def _reclaim_from_dead_local_consumers(
        self, ns: str, stream: str, owner: str, lease_s: float
    ) -> Job | None:
        """Entries read by a consumer process of this host that no longer exists are taken at once.

        (A worker killed between reading an entry and leasing its job leaves the job queued with
        its only entry pending under the dead consumer.) Checked at most once a second.
        """
        now = time.monotonic()
        if now - self._consumers_checked.get(ns, 0.0) < 1.0:
            return None
        self._consumers_checked[ns] = now
        host = socket.gethostname()
        for consumer in self.db.r.xinfo_consumers(stream, GROUP):
            name = str(consumer["name"])
            consumer_host, pid = parse_owner(name)
            if consumer_host != host or pid is None or pid_alive(pid):
                continue
            job = None
            for pending in self.db.r.xpending_range(stream, GROUP, "-", "+", 100, consumername=name):
                entry = str(pending["message_id"])
                self.db.r.xclaim(stream, GROUP, owner, 0, [entry], justid=True)
                job = self._take_entry(ns, stream, entry, owner, lease_s)
                if job is not None:
                    break
            if not self.db.r.xpending_range(stream, GROUP, "-", "+", 1, consumername=name):
                self.db.r.xgroup_delconsumer(stream, GROUP, name)
            if job is not None:
                return job
        return None

    def _take_entry(self, ns: str, stream: str, entry: str, owner: str, lease_s: float) -> Job | None:
        found = self.db.r.xrange(stream, entry, entry)
        if not found:
            self.db.r.xack(stream, GROUP, entry)
            return None
        return self._take(ns, found[0][1].get("job", ""), owner, lease_s, entry=entry)

    def _take(self, ns: str, job_id: str, owner: str, lease_s: float, *, entry: str | None) -> Job | None:
        """Lease ``job_id``: queued (its stream ``entry`` in hand) or leased with an expired lease.

        ``entry`` is None when the job was found through the ``leases`` zset.
        """
        now = self.db.clock()

        def plan(pipe: Pipe) -> Callable[[Pipe], Job | None]:
            job, stored_entry = self.read_job(pipe, ns, job_id)
            # A queued job is due once its entry is on the stream (promotion checks run_after).
            queued = job is not None and job.status == queueing.QUEUED and entry is not None
            expired = job is not None and queueing.lease_expired(job, now)
            if job is None or not (queued or expired):
                live = (queueing.QUEUED, queueing.LEASED)
                stale = entry is not None and (job is None or job.status not in live)
                return lambda p: self._q_drop_entry(p, ns, entry) if stale and entry else None
            new_entry = (entry or "") if queued else (stored_entry or entry or "")
            taken = queueing.take(job, owner, now, lease_s)
            if taken.action == "dead":

                def bury(p: Pipe) -> None:
                    self.q_save_job(p, taken.job, job.status, entry="")
                    self.q_unstream(p, taken.job, new_entry)

                return bury

            def lease(p: Pipe) -> Job:
                self.q_save_job(p, taken.job, job.status, entry=new_entry)
                return taken.job

            return lease

        return self.db.transact(plan)

    def _q_drop_entry(self, pipe: Pipe, ns: str, entry: str) -> None:
        stream = self.db.k(ns, "stream")
        pipe.xack(stream, GROUP, entry)
        pipe.xdel(stream, entry)

    def _expire_dead_local_leases(self, ns: str) -> None:
        """Leases held by processes of this host that no longer exist are expired at once."""
        host = socket.gethostname()
        leased = self.db.r.zrange(self.db.k(ns, "leases"), 0, 50)
        if not leased:
            return
        for job_id in leased:
            data = self.db.r.hget(self.db.k(ns, "job", job_id), "data")
            if not data:
                continue
            job = Job.model_validate_json(data)
            owner_host, pid = parse_owner(job.lease_owner or "")
            if owner_host == host and pid is not None and not pid_alive(pid):
                self._expire_lease(ns, job.id, job.lease_owner or "")

    def _expire_lease(self, ns: str, job_id: str, owner: str) -> None:
        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            job, _ = self.read_job(pipe, ns, job_id)
            if job is None or job.status != queueing.LEASED or job.lease_owner != owner:
                return lambda p: None
            expired = queueing.apply(job, queueing.expiring())
            return lambda p: self.q_save_job(p, expired, job.status)

        self.db.transact(plan)

    # ----------------------------------------------------------------- moving leased jobs on

    def leased(self, pipe: Pipe, job_id: str, owner: str) -> tuple[Job, str]:
        ns = self.db.namespace_of(job_id)
        job, entry = self.read_job(pipe, ns, job_id) if ns is not None else (None, "")
        if job is None or job.status != queueing.LEASED or job.lease_owner != owner:
            raise LeaseLostError(f"job {job_id} is no longer leased by {owner}")
        return job, entry

    def _q_requeue(self, pipe: Pipe, old: Job, new: Job, entry: str) -> None:
        self.q_save_job(pipe, new, old.status, entry="")
        self.q_unstream(pipe, new, entry)
        if new.status == queueing.QUEUED:
            self._q_schedule(pipe, new)

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        now = self.db.clock()

        def plan(pipe: Pipe) -> Callable[[Pipe], Job]:
            job, entry = self.leased(pipe, job_id, owner)
            new = queueing.failed(job, now, truncated(error, JOB_TEXT_MAX_CHARS), retry_at)

            def write(p: Pipe) -> Job:
                self._q_requeue(p, job, new, entry)
                return new

            return write

        return self.db.transact(plan)

    def release_job(self, job_id: str, owner: str) -> None:
        """Give a leased job back without spending an attempt (the worker stopped, the job did not fail)."""
        self._give_back(job_id, owner, queueing.QUEUED, None)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        """Set a job aside as ``waiting`` (its setup is missing something) without spending an attempt."""
        self._give_back(job_id, owner, queueing.WAITING, detail)

    def _give_back(self, job_id: str, owner: str, status: JobStatus, detail: str | None) -> None:
        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            job, entry = self.leased(pipe, job_id, owner)
            short = None if detail is None else truncated(detail, JOB_TEXT_MAX_CHARS)
            new = queueing.given_back(job, self.db.clock(), status, short)
            return lambda p: self._q_requeue(p, job, new, entry)

        self.db.transact(plan)

    def _requeue_matching(
        self, ns: str, job_ids: Sequence[str], statuses: Sequence[str], move: Callable[[Job], Job]
    ) -> int:
        """Requeue those of ``job_ids`` whose status is one of ``statuses``, each as ``move`` makes it."""
        count = 0
        for job_id in job_ids:

            def plan(pipe: Pipe, job_id: str = job_id) -> Callable[[Pipe], int]:
                job, entry = self.read_job(pipe, ns, job_id)
                if job is None or job.status not in statuses:
                    return lambda p: 0
                new = move(job)

                def write(p: Pipe) -> int:
                    self._q_requeue(p, job, new, entry)
                    return 1

                return write

            count += self.db.transact(plan)
        return count

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        def run() -> int:
            count = 0
            for ns in namespaces if namespaces is not None else self.db.all_namespaces():
                self.db.ensure_group(ns)
                waiting = sorted(self.db.r.smembers(self.db.k(ns, "jobs", queueing.WAITING)))
                unpark = partial(queueing.unparked, now=self.db.clock())
                count += self._requeue_matching(ns, waiting, [queueing.WAITING], unpark)
            return count

        return self.db.run(run)

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead and waiting jobs (all of the namespace, or the given ids) with a fresh attempt budget."""

        def run() -> int:
            self.db.ensure_group(namespace)
            ids = job_ids
            if ids is None:
                ids = sorted(
                    self.db.r.sunion([self.db.k(namespace, "jobs", status) for status in queueing.RETRYABLE])
                )
            retry = partial(queueing.retried, now=self.db.clock())
            return self._requeue_matching(namespace, ids, queueing.RETRYABLE, retry)

        return self.db.run(run)

    # ----------------------------------------------------------------- reading jobs

    def get_job(self, job_id: str, *, namespace: str | None = None) -> Job:
        def run() -> str | None:
            ns = self.db.namespace_of(job_id)
            if ns is None or not visible(namespace, ns):
                return None
            data: str | None = self.db.r.hget(self.db.k(ns, "job", job_id), "data")
            return data

        data = self.db.run(run)
        if not data:
            raise NotFoundError("job", job_id)
        return Job.model_validate_json(data)

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        def run() -> list[Job]:
            jobs: list[Job] = []
            for ns in [namespace] if namespace is not None else self.db.all_namespaces():
                ids = self.db.r.zrevrange(self.db.k(ns, "jobs"), 0, -1)
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    pipe = self.db.r.pipeline(transaction=False)
                    for job_id in chunk:
                        pipe.hget(self.db.k(ns, "job", job_id), "data")
                    for data in pipe.execute():
                        if data:
                            job = Job.model_validate_json(data)
                            if not statuses or job.status in statuses:
                                jobs.append(job)
                    if namespace is not None and len(jobs) >= limit:
                        break
            jobs.sort(key=lambda job: job.created_at, reverse=True)
            return jobs[:limit]

        return self.db.run(run)

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        def run() -> int:
            count = 0
            for status in statuses:
                for job_id in sorted(self.db.r.smembers(self.db.k(namespace, "jobs", status))):

                    def plan(pipe: Pipe, job_id: str = job_id, status: str = status) -> Callable[[Pipe], int]:
                        job, entry = self.read_job(pipe, namespace, job_id)
                        if job is None or job.status != status:
                            return lambda p: 0

                        def write(p: Pipe) -> int:
                            self.q_delete_job(p, job, entry)
                            return 1

                        return write

                    count += self.db.transact(plan)
            return count

        return self.db.run(run)

    def q_delete_job(self, pipe: Pipe, job: Job, entry: str) -> None:
        """Queue the removal of ``job`` (read under WATCH, with its stream ``entry``) and all its index entries."""
        ns = job.namespace
        pipe.delete(self._job_key(job))
        pipe.srem(self.db.k(ns, "jobs", job.status), job.id)
        pipe.zrem(self.db.k(ns, "jobs"), job.id)
        pipe.zrem(self.db.k(ns, "delayed"), job.id)
        pipe.zrem(self.db.k(ns, "leases"), job.id)
        pipe.delete(self.db.k(ns, "dedupe", job.dedupe_key))
        pipe.hdel(self.db.where_key, job.id)
        self.q_unstream(pipe, job, entry)

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        def run() -> dict[str, int]:
            spaces = namespaces if namespaces is not None else self.db.all_namespaces()
            statuses = queueing.STATUSES
            pipe = self.db.r.pipeline(transaction=False)
            for ns in spaces:
                for status in statuses:
                    pipe.scard(self.db.k(ns, "jobs", status))
            counts: dict[str, int] = {}
            for index, n in enumerate(pipe.execute()):
                if n:
                    status = statuses[index % len(statuses)]
                    counts[status] = counts.get(status, 0) + int(n)
            return counts

        return self.db.run(run)

    def namespaces(self) -> list[str]:
        # Every write of an episode, a lesson or a job adds its namespace to this set.
        return self.db.run(self.db.all_namespaces)

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        """When the next queued job becomes due (or a lease expires), for workers deciding how long to sleep."""

        def run() -> float | None:
            best: float | None = None
            for ns in namespaces if namespaces is not None else self.db.all_namespaces():
                pipe = self.db.r.pipeline(transaction=False)
                pipe.scard(self.db.k(ns, "jobs", queueing.QUEUED))
                pipe.zcard(self.db.k(ns, "delayed"))
                pipe.zrange(self.db.k(ns, "delayed"), 0, 0, withscores=True)
                pipe.zrange(self.db.k(ns, "leases"), 0, 0, withscores=True)
                queued, delayed, first_delayed, first_lease = pipe.execute()
                if queued > delayed:
                    return self.db.clock()
                for found in (first_delayed, first_lease):
                    if found and (best is None or found[0][1] < best):
                        best = float(found[0][1])
            return best

        return self.db.run(run)
