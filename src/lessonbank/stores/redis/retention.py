"""The Redis store's retention (the RetentionStore port): old reflections, done jobs and episodes.

Records are found by the score of their namespace's zset (created_at) or, for done jobs, their
status set, then deleted a chunk at a time, each record with every index entry that names it:

- a reflection: its JSON, the ``reflections`` and ``episode_reflections`` zsets, its ``where`` entry;
- a done job: as ``jobs purge`` deletes it (WATCHed, so a job that changed meanwhile is left alone);
- an episode: its hash and the ``episodes`` zset entry; its ``where`` entry too, unless reflections
  of it are kept (``reflections_for_episode`` finds the namespace of an episode through it).

Episodes are listed before the jobs that protect them are read, so an episode recorded during the
purge (with its job) is never among those deleted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from lessonbank import queueing
from lessonbank.models import Job
from lessonbank.ports import Purged, RetentionCutoffs
from lessonbank.stores.redis.db import Pipe, RedisDatabase
from lessonbank.stores.redis.queue import RedisJobQueue

CHUNK = 500
UNFINISHED = tuple(status for status in queueing.STATUSES if status != queueing.DONE)


class RedisRetention:
    """``purge_old`` over one database and its job queue."""

    def __init__(self, db: RedisDatabase, jobs: RedisJobQueue) -> None:
        self.db = db
        self.jobs = jobs

    def purge_old(self, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool = False) -> Purged:
        def run() -> Purged:
            purged = Purged()
            if cutoffs.reflections_before is not None:
                purged.reflections = self._reflections(namespace, cutoffs.reflections_before, dry_run)
            if cutoffs.done_jobs_before is not None:
                purged.jobs = self._done_jobs(namespace, cutoffs.done_jobs_before, dry_run)
            if cutoffs.episodes_before is not None:
                purged.episodes = self._episodes(namespace, cutoffs.episodes_before, dry_run)
            return purged

        return self.db.run(run)

    def _older(self, zset: str, before: float) -> list[str]:
        return list(self.db.r.zrangebyscore(zset, "-inf", f"({before!r}"))

    def _reflections(self, ns: str, before: float, dry_run: bool) -> int:
        ids = self._older(self.db.k(ns, "reflections"), before)
        if dry_run:
            return len(ids)
        for chunk in _chunks(ids):
            found = self.db.r.mget([self.db.k(ns, "reflection", i) for i in chunk])
            pipe = self.db.r.pipeline(transaction=True)
            for reflection_id, data in zip(chunk, found, strict=True):
                episode_id = json.loads(data).get("episode_id") if data else None
                pipe.delete(self.db.k(ns, "reflection", reflection_id))
                pipe.zrem(self.db.k(ns, "reflections"), reflection_id)
                if episode_id:
                    pipe.zrem(self.db.k(ns, "episode_reflections", episode_id), reflection_id)
                pipe.hdel(self.db.where_key, reflection_id)
            pipe.execute()
        return len(ids)

    def _done_jobs(self, ns: str, before: float, dry_run: bool) -> int:
        ids = sorted(self.db.r.smembers(self.db.k(ns, "jobs", queueing.DONE)))
        count = 0
        for chunk in _chunks(ids):
            old = [job.id for job in self._jobs(ns, chunk) if _done_before(job, before)]
            if dry_run or not old:
                count += len(old)
                continue
            count += self.db.transact(partial(self._plan_delete, ns=ns, job_ids=old, before=before))
        return count

    def _plan_delete(
        self, pipe: Pipe, ns: str, job_ids: Sequence[str], before: float
    ) -> Callable[[Pipe], int]:
        doomed = []
        for job_id in job_ids:
            job, entry = self.jobs.read_job(pipe, ns, job_id)  # WATCHed: a job that moved meanwhile stays
            if job is not None and _done_before(job, before):
                doomed.append((job, entry))

        def write(p: Pipe) -> int:
            for job, entry in doomed:
                self.jobs.q_delete_job(p, job, entry)
            return len(doomed)

        return write

    def _episodes(self, ns: str, before: float, dry_run: bool) -> int:
        candidates = self._older(self.db.k(ns, "episodes"), before)
        if not candidates:
            return 0
        unfinished = sorted(self.db.r.sunion([self.db.k(ns, "jobs", status) for status in UNFINISHED]))
        needed = {job.episode_id for chunk in _chunks(unfinished) for job in self._jobs(ns, chunk)}
        old = [episode_id for episode_id in candidates if episode_id not in needed]
        if dry_run:
            return len(old)
        for chunk in _chunks(old):
            read = self.db.r.pipeline(transaction=False)
            for episode_id in chunk:
                read.zcard(self.db.k(ns, "episode_reflections", episode_id))
            kept = read.execute()
            pipe = self.db.r.pipeline(transaction=True)
            for episode_id, reflections in zip(chunk, kept, strict=True):
                pipe.delete(self.db.k(ns, "episode", episode_id))
                pipe.zrem(self.db.k(ns, "episodes"), episode_id)
                if not reflections:
                    pipe.hdel(self.db.where_key, episode_id)
            pipe.execute()
        return len(old)

    def _jobs(self, ns: str, job_ids: Sequence[str]) -> list[Job]:
        pipe = self.db.r.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hget(self.db.k(ns, "job", job_id), "data")
        return [Job.model_validate_json(data) for data in pipe.execute() if data]


def _done_before(job: Job, before: float) -> bool:
    return job.status == queueing.DONE and (job.finished_at or job.updated_at).timestamp() < before


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]
