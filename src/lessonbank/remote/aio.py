"""AsyncRemoteBank: AsyncLessonBank's methods over HTTP, against ``lessonbank serve``.

Each method builds its operation's request model from its arguments (``Request.of(locals())``: the
parameters are the model's fields) and sends it (:class:`~.transport.AsyncTransport`);
the table of operations says where it goes. The two remote facades differ only by ``async``/``await``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx

from lessonbank import requests as rq
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.remote import calls
from lessonbank.remote.transport import AsyncTransport
from lessonbank.requests import GoalState, LessonSort
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.transfer import ExportFormat, ExportTarget


class AsyncRemoteBank(AsyncTransport):
    """A bank served by ``lessonbank serve``, with :class:`~lessonbank.AsyncLessonBank`'s methods,
    arguments and return types: moving an agent to a shared server is one line.

    >>> bank = AsyncRemoteBank("http://127.0.0.1:8765", api_key="lbk_…", namespace="team-a")  # doctest: +SKIP

    Errors are the embedded bank's classes (a 404 is NotFoundError, a 422 InputError, a missing or
    refused key ConfigError, an unreachable server StoreError). ``client``: the httpx client to send
    through (its own TLS, proxies or transport); it is left open by :meth:`close`.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        namespace: str = "default",
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(url, api_key, namespace, timeout, client)

    async def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        return await self._call(rq.RecordRequest.of(locals()))

    async def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        return await self._call(rq.ReflectRequest.of(locals()))

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
        return await self._call(rq.FinishGoalRequest.of(locals()))

    async def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return await self._call(rq.InsightsRequest.of(locals()))

    async def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return await self._call(rq.RulesRequest.of(locals()))

    async def replay(
        self, *, task: str | None = None, task_type: str | None = None, k: int = 3
    ) -> list[Lesson]:
        return await self._call(rq.ReplayRequest.of(locals()))

    async def confirm_rule(self, rule_id: str) -> Lesson:
        return await self._call(rq.ConfirmRuleRequest.of(locals()))

    async def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return await self._call(rq.DecisionsRequest.of(locals()))

    async def pending(self) -> dict[str, int]:
        return await self._call(rq.PendingRequest.model_construct())

    async def flush(self, timeout: float = 30.0) -> bool:
        """Wait until the namespace has no queued or running jobs (the server's worker runs them)."""
        deadline = time.monotonic() + calls.seconds(timeout, "timeout")
        while True:
            left = max(0.0, deadline - time.monotonic())
            done = await self._call(rq.FlushRequest.model_construct(timeout=min(left, calls.MAX_FLUSH_S)))
            if done or left <= calls.MAX_FLUSH_S:
                return done

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
        return await self._call(rq.AddLessonRequest.of(locals()))

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
        return await self._call(rq.RecallRequest.of(locals()))

    async def expand(
        self,
        lesson_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        actor: str = "api",
    ) -> ExpansionReport:
        return await self._call(rq.ExpandRequest.of(locals()))

    async def embed_missing(self) -> int:
        return await self._call(rq.EmbedMissingRequest.model_construct())

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
        return await self._call(rq.ContextRequest.of(locals()))

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
        return await self._call(rq.LessonsRequest.of(locals()))

    async def get_lesson(self, lesson_id: str) -> Lesson:
        return await self._call(rq.GetLessonRequest.of(locals()))

    async def show(self, record_id: str) -> dict[str, Any]:
        return await self._call(rq.ShowRequest.of(locals()))

    async def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        await self._call(rq.ForgetRequest.of(locals()))

    async def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        return await self._call(rq.ArchiveRequest.of(locals()))

    async def edit_lesson(
        self,
        lesson_id: str,
        *,
        pinned: bool | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        actor: str = "api",
    ) -> Lesson:
        return await self._call(rq.EditLessonRequest.of(locals()))

    async def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        return await self._call(rq.RestoreRequest.of(locals()))

    async def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        return await self._call(rq.AuditRequest.of(locals()))

    async def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Sent in requests of up to 1,000 records (and 2 MB), each imported as it arrives."""
        total = {"added": 0, "reinforced": 0, "skipped": 0}
        for batch, skipped in calls.import_batches(records):
            total["skipped"] += skipped
            if batch:
                counts = await self._call(rq.ImportRequest.model_construct(lessons=batch))
                calls.add_counts(total, counts)
        return total

    async def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return await self._call(rq.ExportRequest.of(locals()))

    async def export_to(
        self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False
    ) -> int:
        """Streamed from the server as JSON Lines and written to ``dest`` in ``format``."""
        return await self._export_to(dest, format, live_only)

    async def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return await self._call(rq.SearchReflectionsRequest.of(locals()))

    async def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return await self._call(rq.JobsRequest.of(locals()))

    async def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        return await self._call(rq.RetryJobsRequest.of(locals()))

    async def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return await self._call(rq.PurgeJobsRequest.of(locals()))

    async def consolidate(self, *, dry_run: bool = False, wait: bool = True) -> Proposal | None:
        """The server runs the cycle (``wait=True`` waits up to 15 minutes more than ``timeout``)."""
        return await self._call(rq.ConsolidateRequest.of(locals()))

    async def end_session(self, *, agent: str | None = None, session_id: str | None = None) -> Job | None:
        return await self._call(rq.EndSessionRequest.of(locals()))

    async def proposals(
        self, *, status: str | Sequence[str] | None = None, limit: int = 50
    ) -> list[Proposal]:
        return await self._call(rq.ProposalsRequest.of(locals()))

    async def proposal(self, proposal_id: str) -> Proposal:
        return await self._call(rq.ProposalRequest.of(locals()))

    async def approve(
        self,
        proposal_id: str,
        *,
        only: Sequence[str] | None = None,
        edits: Mapping[str, str] | None = None,
        actor: str = "api",
    ) -> Proposal:
        return await self._call(rq.ApproveRequest.of(locals()))

    async def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        return await self._call(rq.RejectRequest.of(locals()))

    async def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        return await self._call(rq.RevertRequest.of(locals()))

    async def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        return await self._call(rq.DreamsRequest.of(locals()))

    async def core_memory(self) -> str:
        return await self._call(rq.CoreMemoryRequest.model_construct())

    async def rescreen(self, *, dry_run: bool = False) -> dict[str, int]:
        return await self._call(rq.RescreenRequest.of(locals()))

    async def apply_retention(
        self, *, older_than_days: float | None = None, dry_run: bool = False
    ) -> dict[str, int]:
        return await self._call(rq.RetentionRequest.of(locals()))

    async def stats(self) -> dict[str, Any]:
        return await self._call(rq.StatsRequest.model_construct())

    async def __aenter__(self) -> AsyncRemoteBank:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
