# Generated from src/lessonbank/remote/aio.py by scripts/unasync.py: do not edit.
# Edit the source, then run `python scripts/unasync.py` (tests/test_generated.py checks this file is current).
"""RemoteBank: LessonBank's methods over HTTP, against ``lessonbank serve``.

Each method builds its operation's request model and sends it (:class:`~.transport.Transport`);
the table of operations says where it goes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx

from lessonbank import requests as rq
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.remote import calls
from lessonbank.remote.transport import Transport
from lessonbank.requests import GoalState, LessonSort
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.transfer import ExportFormat, ExportTarget


class RemoteBank(Transport):
    """A bank served by ``lessonbank serve``, with :class:`~lessonbank.LessonBank`'s methods,
    arguments and return types: moving an agent to a shared server is one line.

    >>> bank = RemoteBank("http://127.0.0.1:8765", api_key="lbk_…", namespace="team-a")  # doctest: +SKIP

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
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(url, api_key, namespace, timeout, client)

    def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        return self._call(rq.RecordRequest.of(locals()))

    def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        return self._call(rq.ReflectRequest.of(locals()))

    def finish_goal(
        self,
        goal_id: str,
        *,
        title: str | None = None,
        status: GoalState = "completed",
        outputs: Sequence[str] = (),
        errors: Sequence[str] = (),
        agent: str | None = None,
    ) -> Episode:
        return self._call(rq.FinishGoalRequest.of(locals()))

    def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return self._call(rq.InsightsRequest.of(locals()))

    def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return self._call(rq.RulesRequest.of(locals()))

    def replay(self, *, task: str | None = None, task_type: str | None = None, k: int = 3) -> list[Lesson]:
        return self._call(rq.ReplayRequest.of(locals()))

    def confirm_rule(self, rule_id: str) -> Lesson:
        return self._call(rq.ConfirmRuleRequest.of(locals()))

    def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return self._call(rq.DecisionsRequest.of(locals()))

    def pending(self) -> dict[str, int]:
        return self._call(rq.PendingRequest.model_construct())

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until the namespace has no queued or running jobs (the server's worker runs them)."""
        deadline = time.monotonic() + calls.seconds(timeout, "timeout")
        while True:
            left = max(0.0, deadline - time.monotonic())
            done = self._call(rq.FlushRequest.model_construct(timeout=min(left, calls.MAX_FLUSH_S)))
            if done or left <= calls.MAX_FLUSH_S:
                return done

    def add_lesson(
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
        return self._call(rq.AddLessonRequest.of(locals()))

    def recall(
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
        return self._call(rq.RecallRequest.of(locals()))

    def expand(
        self,
        lesson_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        actor: str = "api",
    ) -> ExpansionReport:
        return self._call(rq.ExpandRequest.of(locals()))

    def embed_missing(self) -> int:
        return self._call(rq.EmbedMissingRequest.model_construct())

    def context(
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
        return self._call(rq.ContextRequest.of(locals()))

    def lessons(
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
        return self._call(rq.LessonsRequest.of(locals()))

    def get_lesson(self, lesson_id: str) -> Lesson:
        return self._call(rq.GetLessonRequest.of(locals()))

    def show(self, record_id: str) -> dict[str, Any]:
        return self._call(rq.ShowRequest.of(locals()))

    def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        self._call(rq.ForgetRequest.of(locals()))

    def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        return self._call(rq.ArchiveRequest.of(locals()))

    def edit_lesson(
        self,
        lesson_id: str,
        *,
        pinned: bool | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        actor: str = "api",
    ) -> Lesson:
        return self._call(rq.EditLessonRequest.of(locals()))

    def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        return self._call(rq.RestoreRequest.of(locals()))

    def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        return self._call(rq.AuditRequest.of(locals()))

    def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Sent in requests of up to 1,000 records (and 2 MB), each imported as it arrives."""
        total = {"added": 0, "reinforced": 0, "skipped": 0}
        for batch, skipped in calls.import_batches(records):
            total["skipped"] += skipped
            if batch:
                counts = self._call(rq.ImportRequest.model_construct(lessons=batch))
                calls.add_counts(total, counts)
        return total

    def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return self._call(rq.ExportRequest.of(locals()))

    def export_to(self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False) -> int:
        """Streamed from the server as JSON Lines and written to ``dest`` in ``format``."""
        return self._export_to(dest, format, live_only)

    def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return self._call(rq.SearchReflectionsRequest.of(locals()))

    def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return self._call(rq.JobsRequest.of(locals()))

    def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        return self._call(rq.RetryJobsRequest.of(locals()))

    def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return self._call(rq.PurgeJobsRequest.of(locals()))

    def consolidate(self, *, dry_run: bool = False, wait: bool = True) -> Proposal | None:
        """The server runs the cycle (``wait=True`` waits up to 15 minutes more than ``timeout``)."""
        return self._call(rq.ConsolidateRequest.of(locals()))

    def end_session(self, *, agent: str | None = None, session_id: str | None = None) -> Job | None:
        return self._call(rq.EndSessionRequest.of(locals()))

    def proposals(self, *, status: str | Sequence[str] | None = None, limit: int = 50) -> list[Proposal]:
        return self._call(rq.ProposalsRequest.of(locals()))

    def proposal(self, proposal_id: str) -> Proposal:
        return self._call(rq.ProposalRequest.of(locals()))

    def approve(
        self,
        proposal_id: str,
        *,
        only: Sequence[str] | None = None,
        edits: Mapping[str, str] | None = None,
        actor: str = "api",
    ) -> Proposal:
        return self._call(rq.ApproveRequest.of(locals()))

    def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        return self._call(rq.RejectRequest.of(locals()))

    def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        return self._call(rq.RevertRequest.of(locals()))

    def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        return self._call(rq.DreamsRequest.of(locals()))

    def core_memory(self) -> str:
        return self._call(rq.CoreMemoryRequest.model_construct())

    def rescreen(self, *, dry_run: bool = False) -> dict[str, int]:
        return self._call(rq.RescreenRequest.of(locals()))

    def apply_retention(
        self, *, older_than_days: float | None = None, dry_run: bool = False
    ) -> dict[str, int]:
        return self._call(rq.RetentionRequest.of(locals()))

    def stats(self) -> dict[str, Any]:
        return self._call(rq.StatsRequest.model_construct())

    def __enter__(self) -> RemoteBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
