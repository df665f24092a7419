"""The memory store's retention (the RetentionStore port): old records deleted by age, in one step.

The caller holds the database lock, so what is counted is what is deleted.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import datetime
from typing import Any

from lessonbank.models import Episode, Reflection
from lessonbank.ports import Purged, RetentionCutoffs
from lessonbank.stores.memory_jobs import JobTable


def purge_old(
    table: JobTable,
    episodes: MutableMapping[str, tuple[str, Episode, Any]],
    reflections: MutableMapping[str, Reflection],
    namespace: str,
    cutoffs: RetentionCutoffs,
    *,
    dry_run: bool = False,
) -> Purged:
    """Delete (or count, with ``dry_run``) the namespace's records past the cut-offs (see the port)."""
    jobs = table.jobs.values()
    needed = {j.episode_id for j in jobs if j.namespace == namespace and j.status != "done"}
    old_episodes = [
        episode_id
        for episode_id, (ns, episode, _) in episodes.items()
        if ns == namespace
        and episode_id not in needed
        and _before(episode.created_at, cutoffs.episodes_before)
    ]
    old_reflections = [
        r.id
        for r in reflections.values()
        if r.namespace == namespace and _before(r.created_at, cutoffs.reflections_before)
    ]
    old_jobs = [
        j
        for j in jobs
        if j.namespace == namespace
        and j.status == "done"
        and _before(j.finished_at or j.updated_at, cutoffs.done_jobs_before)
    ]
    if not dry_run:
        for episode_id in old_episodes:
            del episodes[episode_id]
        for reflection_id in old_reflections:
            del reflections[reflection_id]
        for job in old_jobs:
            del table.jobs[job.id]
            if table.dedupe.get((namespace, job.dedupe_key)) == job.id:
                del table.dedupe[(namespace, job.dedupe_key)]
    return Purged(episodes=len(old_episodes), reflections=len(old_reflections), jobs=len(old_jobs))


def _before(when: datetime, cutoff: float | None) -> bool:
    return cutoff is not None and when.timestamp() < cutoff
