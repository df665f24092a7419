"""AsyncLessonBank: the same bank as coroutines; the worker runs on the caller's event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lessonbank.bank.base import BankBase, GoalState, in_thread
from lessonbank.jobs import Worker
from lessonbank.loop.records import search_reflections
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.ports import LessonSort
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.services.consolidation.jobs import check_wait
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.recording import flush_answer
from lessonbank.services.transfer import ExportFormat, ExportTarget

if TYPE_CHECKING:
    pass


class AsyncLessonBank(BankBase):
    """The same bank as coroutines. The worker runs as a task on the caller's event loop."""

    def _start(self) -> None:
        self._worker: Worker | None = None
        self._task: asyncio.Task[None] | None = None

    def _kick(self) -> None:
        if not self._runs_worker:
            return
        if self._task is None or self._task.done():
            if self.reflection_llm is not None:
                self.store.release_waiting([self.namespace])
            self._worker = self.services.new_worker([self.namespace])
            self._task = asyncio.get_running_loop().create_task(self._worker.run())
        assert self._worker is not None
        self._worker.wake()

    async def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        return self._queued(await in_thread(self.services.recorder.record)(episode, context_ids))

    async def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        return self._queued(await in_thread(self.services.recorder.reflect)(episode_id, reflector))

    async def finish_goal(
        self,
        goal_id: str,
        *,
        title: str | None = None,
        status: GoalState = "completed",
        outputs: Sequence[str] = (),
        errors: Sequence[str] = (),
        agent: str | None = None,
    ) -> Episode:
        # Copied here, on the caller's side, before the service reads them in a thread.
        outputs = list(outputs) if not isinstance(outputs, str) else outputs
        errors = list(errors) if not isinstance(errors, str) else errors
        return self._queued(
            await in_thread(self.services.recorder.finish_goal)(
                goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent
            )
        )

    async def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return await in_thread(self.services.pools.insights)(goal_id)

    async def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return await in_thread(self.services.pools.rules)(agent, stream)

    async def replay(
        self, *, task: str | None = None, task_type: str | None = None, k: int = 3
    ) -> list[Lesson]:
        return await in_thread(self.services.pools.replay)(task, task_type, k)

    async def confirm_rule(self, rule_id: str) -> Lesson:
        return await in_thread(self.services.pools.confirm_rule)(rule_id)

    async def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return await in_thread(self.services.recorder.decisions)(agent, limit)

    async def new_worker(self, namespaces: Sequence[str] | None = None) -> Worker:
        """A worker that runs this bank's reflection jobs (``namespaces=None``: every namespace), not started."""
        return self.services.new_worker(namespaces)

    async def pending(self) -> dict[str, int]:
        return await in_thread(self.services.recorder.pending)()

    async def flush(self, timeout: float = 30.0) -> bool:
        self._kick()
        deadline = time.monotonic() + timeout
        while True:
            done = flush_answer(await self.pending(), self._worker, deadline)
            if done is not None:
                return done
            if self._worker is not None:
                self._worker.wake()
            await asyncio.sleep(0.02)

    async def add_lesson(
        self,
        text: str,
        *,
        tags: Iterable[str] = (),
        kind: LessonKind = "lesson",
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        importance: float = 0.5,
        pinned: bool = False,
        learned_from: str | None = None,
    ) -> Lesson:
        return await in_thread(self.services.intake.add_lesson)(
            text,
            tags=tags,
            kind=kind,
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            importance=importance,
            pinned=pinned,
            learned_from=learned_from,
        )

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        kind: str | Sequence[str] | None = None,
        tags: Sequence[str] = (),
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        mode: str | None = None,
        hyde: bool | None = None,
    ) -> list[Hit]:
        context = self.services.context
        filters = context.query(kind=kind, tags=tags, task_type=task_type, agent=agent, goal_id=goal_id)
        return await in_thread(context.recall)(query, k, filters, mode, hyde)

    async def expand(
        self,
        lesson_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        actor: str = "api",
    ) -> ExpansionReport:
        expander = self.services.expansion
        lessons, report = await in_thread(expander.prepare)(lesson_ids, limit)
        return report if dry_run else await expander.expand(lessons, report, actor=actor)

    async def embed_missing(self) -> int:
        return await in_thread(self.services.intake.embed_missing)()

    async def context(
        self,
        task: str | None = None,
        *,
        goal_id: str | None = None,
        agent: str | None = None,
        task_type: str | None = None,
        budget_tokens: int = 800,
        formats: Sequence[str] | None = None,
        kind: str | Sequence[str] | None = None,
        tags: Sequence[str] = (),
    ) -> ContextBlock:
        context = self.services.context
        filters = context.query(kind=kind, tags=tags)
        return await in_thread(context.context)(
            task, budget_tokens, formats, filters, goal_id=goal_id, agent=agent, task_type=task_type
        )

    async def lessons(
        self,
        *,
        kind: str | Sequence[str] | None = None,
        tags: Sequence[str] = (),
        status: str | Sequence[str] = "active",
        limit: int = 100,
        offset: int = 0,
        sort: LessonSort = "created",
        tier: str | None = None,
    ) -> list[Lesson]:
        """Stored lessons of this namespace; with ``tier`` (active, fading, dormant, archive) only
        those whose decay score is in that tier now, ``limit`` and ``offset`` counted within it."""
        query = self.services.context.query(kind=kind, tags=tags, status=status)
        return await in_thread(self.services.catalog.lessons)(
            query, limit=limit, offset=offset, sort=sort, tier=tier
        )

    async def get_lesson(self, lesson_id: str) -> Lesson:
        return await in_thread(self.services.catalog.get_lesson)(lesson_id)

    async def show(self, record_id: str) -> dict[str, Any]:
        return await in_thread(self.services.catalog.show)(record_id)

    async def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        await in_thread(self.services.catalog.forget)(lesson_id, actor=actor)

    async def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        return await in_thread(self.services.lifecycle.archive)(lesson_id, reason=reason, actor=actor)

    async def edit_lesson(
        self,
        lesson_id: str,
        *,
        pinned: bool | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        actor: str = "api",
    ) -> Lesson:
        return await in_thread(self.services.lifecycle.edit)(
            lesson_id, pinned=pinned, tags=tags, importance=importance, actor=actor
        )

    async def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        return await in_thread(self.services.lifecycle.restore)(lesson_id, actor=actor)

    async def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        return await in_thread(self.services.lifecycle.audit)(lesson_id=lesson_id, limit=limit)

    async def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        return await in_thread(self.services.intake.import_lessons)(records)  # read in the thread, lazily

    async def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return await in_thread(self.services.catalog.export)(format, live_only=live_only)

    async def export_to(
        self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False
    ) -> int:
        return await in_thread(self.services.catalog.export_to)(dest, format, live_only=live_only)

    async def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return await in_thread(search_reflections)(
            self,
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords,
            limit=limit,
        )

    async def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return await in_thread(self.services.recorder.jobs)(status, limit)

    async def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        count = await in_thread(self.services.recorder.retry_jobs)(job_ids)
        self._kick()
        return count

    async def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return await in_thread(self.services.recorder.purge_jobs)(statuses)

    async def consolidate(self, *, dry_run: bool = False, wait: bool = True) -> Proposal | None:
        if dry_run is not False:
            return (await in_thread(self.services.consolidation.run)(dry_run=dry_run))[1]
        check_wait(wait)
        job = await in_thread(self.services.cycles.manual)()
        self._kick()
        if not wait:
            return None
        # Waited for in a thread: this loop stays free for the bank's own worker task meanwhile.
        return await in_thread(self.services.cycles.wait)(job, worker=self._helper_worker(job))

    async def end_session(self, *, agent: str | None = None, session_id: str | None = None) -> Job | None:
        job = await in_thread(self.services.cycles.end_session)(agent=agent, session_id=session_id)
        if job is not None:
            self._kick()
        return job

    async def proposals(
        self, *, status: str | Sequence[str] | None = None, limit: int = 50
    ) -> list[Proposal]:
        return await in_thread(self.services.consolidation.proposals)(status=status, limit=limit)

    async def proposal(self, proposal_id: str) -> Proposal:
        return await in_thread(self.services.consolidation.proposal)(proposal_id)

    async def approve(
        self,
        proposal_id: str,
        *,
        only: Sequence[str] | None = None,
        edits: Mapping[str, str] | None = None,
        actor: str = "api",
    ) -> Proposal:
        return await in_thread(self.services.consolidation.approve)(
            proposal_id, only=only, edits=edits, actor=actor
        )

    async def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        return await in_thread(self.services.consolidation.reject)(proposal_id, reason=reason, actor=actor)

    async def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        return await in_thread(self.services.consolidation.revert)(proposal_id, actor=actor)

    async def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        return await in_thread(self.services.consolidation.dreams)(limit=limit)

    async def core_memory(self) -> str:
        return await in_thread(self.services.consolidation.core_memory)()

    async def rescreen(self, *, dry_run: bool = False) -> dict[str, int]:
        return await in_thread(self.services.intake.rescreen)(
            (lesson for lesson, _ in self.services.catalog.marked_lessons()), dry_run=dry_run
        )

    async def apply_retention(
        self, *, older_than_days: float | None = None, dry_run: bool = False
    ) -> dict[str, int]:
        return await in_thread(self.services.retention.apply)(
            older_than_days=older_than_days, dry_run=dry_run
        )

    async def stats(self) -> dict[str, Any]:
        return await in_thread(self.services.catalog.stats)()

    async def close(self) -> None:
        if self._worker is not None and self._task is not None:
            self._worker.stop()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker = self._task = None
        await in_thread(self.store.close)()

    async def __aenter__(self) -> AsyncLessonBank:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
