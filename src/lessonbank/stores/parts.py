"""Stores built from parts: whole ports forwarded to the part that serves them.

A store that keeps its job queue in ``self.jobs``, its vectors in ``self.vectors`` and its
consolidation records in ``self.consolidation`` takes these mixins instead of writing the same
one-line forwards again; every store reads one lesson as a
batch of one (:class:`ReadsOneLesson`). ``finish_job`` is not forwarded: it
writes lessons and a reflection with the job, so it belongs to the store itself; its keywords are
gathered here once (:class:`FinishesJobs`) into one :class:`JobResult`, as ``apply_proposal``'s
arguments are into one :class:`Application` (:class:`AppliesProposals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lessonbank.errors import NotFoundError
from lessonbank.models import AuditEntry, Job, Lesson, Reflection
from lessonbank.ports import JobAdmin, Placement, VectorChanges, VectorStore, WriteResult
from lessonbank.proposals import DreamRun, Proposal


@dataclass(frozen=True)
class JobResult:
    """What ``finish_job`` writes with the job: its lessons (placed by ``place`` when given), the
    reflection (None when the job made none) and the job's detail."""

    reflection: Reflection | None
    lessons: Sequence[Lesson]
    detail: str
    place: Placement | None = None

    def reflection_of(self, written: Sequence[WriteResult]) -> Reflection | None:
        """The reflection to store: naming the lessons as they were written."""
        if self.reflection is None:
            return None
        return self.reflection.model_copy(update={"lesson_ids": [result.lesson.id for result in written]})


class FinishesJobs:
    """``finish_job`` of a store, written by the store's ``_finish_job`` in one transaction."""

    def _finish_job(self, job_id: str, owner: str, result: JobResult) -> list[WriteResult]:
        raise NotImplementedError

    def finish_job(
        self,
        job_id: str,
        owner: str,
        *,
        reflection: Reflection | None,
        lessons: Sequence[Lesson],
        detail: str,
        place: Placement | None = None,
    ) -> list[WriteResult]:
        return self._finish_job(job_id, owner, JobResult(reflection, lessons, detail, place))


@dataclass(frozen=True)
class Application:
    """One approval's write (``apply_proposal``): the proposal as decided, the lessons to write, the
    audit rows and, when given, the namespace's new cycle state."""

    proposal: Proposal
    writes: Sequence[Lesson]
    audit: Sequence[AuditEntry]
    state: dict[str, Any] | None = None


class AppliesProposals:
    """``apply_proposal`` of a store, written by its ``_apply`` all or nothing."""

    def _apply(self, application: Application) -> None:
        raise NotImplementedError

    def apply_proposal(
        self,
        proposal: Proposal,
        writes: Sequence[Lesson],
        audit: Sequence[AuditEntry],
        *,
        state: dict[str, Any] | None = None,
    ) -> None:
        self._apply(Application(proposal, writes, audit, state))


class QueuePart(JobAdmin, Protocol):
    """The JobQueue port but ``finish_job``, plus JobAdmin: what a store's queue part serves."""

    def enqueue_job(self, job: Job) -> None: ...
    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None: ...
    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None: ...
    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job: ...
    def release_job(self, job_id: str, owner: str) -> None: ...
    def park_job(self, job_id: str, owner: str, *, detail: str) -> None: ...
    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None: ...
    def release_waiting(self, namespaces: Sequence[str] | None) -> int: ...


class ForwardsJobs:
    """The job ports of a store, served by its ``jobs`` part."""

    jobs: QueuePart

    def enqueue_job(self, job: Job) -> None:
        self.jobs.enqueue_job(job)

    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None:
        return self.jobs.lease_job(owner, namespaces, lease_s)

    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None:
        return self.jobs.lease_job_id(job_id, owner, lease_s)

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job:
        return self.jobs.fail_job(job_id, owner, error=error, retry_at=retry_at)

    def release_job(self, job_id: str, owner: str) -> None:
        self.jobs.release_job(job_id, owner)

    def park_job(self, job_id: str, owner: str, *, detail: str) -> None:
        self.jobs.park_job(job_id, owner, detail=detail)

    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None:
        return self.jobs.next_run_after(namespaces)

    def release_waiting(self, namespaces: Sequence[str] | None) -> int:
        return self.jobs.release_waiting(namespaces)

    def get_job(self, job_id: str, *, namespace: str | None = None) -> Job:
        return self.jobs.get_job(job_id, namespace=namespace)

    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]:
        return self.jobs.list_jobs(namespace, statuses, limit)

    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int:
        return self.jobs.retry_jobs(namespace, job_ids)

    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int:
        return self.jobs.purge_jobs(namespace, statuses)

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]:
        return self.jobs.count_jobs(namespaces)

    def namespaces(self) -> list[str]:
        return self.jobs.namespaces()


class ForwardsVectors:
    """The VectorStore port of a store, served by its ``vectors`` part."""

    vectors: VectorStore

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        return self.vectors.put_vectors(namespace, model, rows)

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        return self.vectors.vector_hashes(namespace, model, lesson_ids)

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        return self.vectors.vector_changes(namespace, model, after, limit)

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        return self.vectors.lessons_missing_vectors(namespace, model, limit, after)


class ConsolidationPart(Protocol):
    """What a store's consolidation part serves (the ConsolidationStore port, positional options)."""

    def save_proposal(self, proposal: Proposal) -> None: ...
    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal: ...
    def list_proposals(
        self, namespace: str, statuses: Sequence[str] | None, limit: int
    ) -> list[Proposal]: ...
    def apply(self, application: Application) -> None: ...
    def save_dream(self, run: DreamRun) -> None: ...
    def dreams(self, namespace: str, limit: int) -> list[DreamRun]: ...
    def cycle_state(self, namespace: str) -> dict[str, Any]: ...
    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None: ...


class ForwardsConsolidation(AppliesProposals):
    """The ConsolidationStore port of a store, served by its ``consolidation`` part."""

    consolidation: ConsolidationPart

    def save_proposal(self, proposal: Proposal) -> None:
        self.consolidation.save_proposal(proposal)

    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal:
        return self.consolidation.get_proposal(proposal_id, namespace=namespace)

    def list_proposals(
        self, namespace: str, *, statuses: Sequence[str] | None = None, limit: int = 50
    ) -> list[Proposal]:
        return self.consolidation.list_proposals(namespace, statuses, limit)

    def _apply(self, application: Application) -> None:
        self.consolidation.apply(application)

    def save_dream(self, run: DreamRun) -> None:
        self.consolidation.save_dream(run)

    def dreams(self, namespace: str, *, limit: int = 50) -> list[DreamRun]:
        return self.consolidation.dreams(namespace, limit)

    def cycle_state(self, namespace: str) -> dict[str, Any]:
        return self.consolidation.cycle_state(namespace)

    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None:
        self.consolidation.set_cycle_state(namespace, state)


class _ReadsLessons(Protocol):
    def get_lessons(self, lesson_ids: Sequence[str], *, namespace: str | None = None) -> list[Lesson]: ...


class ReadsOneLesson:
    """``get_lesson`` as ``get_lessons`` of one id, NotFoundError when it is absent."""

    def get_lesson(self: _ReadsLessons, lesson_id: str, *, namespace: str | None = None) -> Lesson:
        found = self.get_lessons([lesson_id], namespace=namespace)
        if not found:
            raise NotFoundError("lesson", lesson_id)
        return found[0]
