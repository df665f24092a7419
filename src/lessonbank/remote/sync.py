"""RemoteBank: LessonBank's methods over HTTP, against ``lessonbank serve``."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from lessonbank.bank.base import GoalState
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.ports import LessonSort
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.remote import calls
from lessonbank.remote import requests as req
from lessonbank.remote.calls import Call
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.transfer import ExportFormat, ExportTarget, check_format

T = TypeVar("T")


class RemoteBank:
    """A bank served by ``lessonbank serve``, with :class:`~lessonbank.LessonBank`'s methods, arguments
    and return types: moving an agent to a shared server is one line.

    >>> bank = RemoteBank("http://127.0.0.1:8765", api_key="lbk_…", namespace="team-a")  # doctest: +SKIP

    Errors are the embedded bank's classes (a 404 is NotFoundError, a 422 InputError, a missing or
    refused key ConfigError, an unreachable server StoreError). ``client``: an ``httpx.Client`` to
    send through (its own TLS, proxies or transport); it is left open by :meth:`close`.
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
        self.url = url
        self.namespace = namespace
        self.timeout = timeout
        self._base = calls.base_url(url, namespace)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owned = client is None
        self._client = client if client is not None else httpx.Client()

    def _run(self, call: Call[T]) -> T:
        try:
            response = self._client.request(
                call.method,
                self._base + call.path,
                params=call.params or None,
                json=call.json,
                headers=self._headers,
                timeout=calls.timeout_of(call, self.timeout),
            )
        except httpx.HTTPError as exc:
            raise calls.transport_error(self.url, exc) from exc
        return calls.parse(call, response)

    def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        return self._run(req.record(episode, context_ids))

    def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        return self._run(req.reflect(episode_id, reflector))

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
        return self._run(
            req.finish_goal(goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent)
        )

    def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return self._run(req.insights(goal_id))

    def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return self._run(req.rules(agent, stream))

    def replay(self, *, task: str | None = None, task_type: str | None = None, k: int = 3) -> list[Lesson]:
        return self._run(req.replay(task, task_type, k))

    def confirm_rule(self, rule_id: str) -> Lesson:
        return self._run(req.confirm_rule(rule_id))

    def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return self._run(req.decisions(agent, limit))

    def pending(self) -> dict[str, int]:
        return self._run(req.pending())

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until the namespace has no queued or running jobs (the server's worker runs them)."""
        deadline = time.monotonic() + calls.seconds(timeout, "timeout")
        while True:
            left = max(0.0, deadline - time.monotonic())
            done = self._run(req.flush(min(left, calls.MAX_FLUSH_S)))
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
        return self._run(
            req.add_lesson(
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
        )

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
        return self._run(
            req.recall(
                query,
                k=k,
                kind=kind,
                tags=tags,
                task_type=task_type,
                agent=agent,
                goal_id=goal_id,
                mode=mode,
                hyde=hyde,
            )
        )

    def expand(
        self,
        lesson_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        actor: str = "api",
    ) -> ExpansionReport:
        return self._run(req.expand(lesson_ids, limit, dry_run, actor))

    def embed_missing(self) -> int:
        return self._run(req.embed_missing())

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
        return self._run(
            req.context(
                task,
                goal_id=goal_id,
                agent=agent,
                task_type=task_type,
                budget_tokens=budget_tokens,
                formats=formats,
                kind=kind,
                tags=tags,
            )
        )

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
        return self._run(
            req.lessons(kind=kind, tags=tags, status=status, limit=limit, offset=offset, sort=sort, tier=tier)
        )

    def get_lesson(self, lesson_id: str) -> Lesson:
        return self._run(req.get_lesson(lesson_id))

    def show(self, record_id: str) -> dict[str, Any]:
        return self._run(req.show(record_id))

    def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        self._run(req.forget(lesson_id, actor))

    def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        return self._run(req.archive(lesson_id, reason, actor))

    def edit_lesson(
        self,
        lesson_id: str,
        *,
        pinned: bool | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        actor: str = "api",
    ) -> Lesson:
        return self._run(req.edit_lesson(lesson_id, pinned, tags, importance, actor))

    def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        return self._run(req.restore(lesson_id, actor))

    def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        return self._run(req.audit(lesson_id, limit))

    def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Sent in requests of up to 1,000 records (and 2 MB), each imported as it arrives."""
        total = {"added": 0, "reinforced": 0, "skipped": 0}
        for batch, skipped in calls.import_batches(records):
            total["skipped"] += skipped
            if batch:
                counts: dict[str, int] = self._run(req.import_batch(batch))
                calls.add_counts(total, counts)
        return total

    def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return self._run(req.export(format, live_only))

    def export_to(self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False) -> int:
        """Streamed from the server as JSON Lines and written in ``format`` as it arrives."""
        call = req.export("jsonl", live_only)
        check_format(format)
        try:
            with self._client.stream(
                "GET",
                self._base + call.path,
                params=call.params,
                headers=self._headers,
                timeout=calls.timeout_of(call, self.timeout),
            ) as response:
                if response.status_code >= 300:
                    response.read()
                    raise calls.error_of(response)
                return calls.write_export(response.iter_lines(), dest, format, self.namespace)
        except httpx.HTTPError as exc:
            raise calls.transport_error(self.url, exc) from exc

    def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return self._run(
            req.search_reflections(
                failure_category=failure_category,
                min_confidence=min_confidence,
                keywords=keywords,
                limit=limit,
            )
        )

    def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return self._run(req.jobs(status, limit))

    def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        return self._run(req.retry_jobs(job_ids))

    def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return self._run(req.purge_jobs(statuses))

    def consolidate(self, *, dry_run: bool = False, wait: bool = True) -> Proposal | None:
        """The server runs the cycle (``wait=True`` waits up to 15 minutes more than ``timeout``)."""
        return self._run(req.consolidate(dry_run, wait))

    def end_session(self, *, agent: str | None = None, session_id: str | None = None) -> Job | None:
        return self._run(req.end_session(agent, session_id))

    def proposals(self, *, status: str | Sequence[str] | None = None, limit: int = 50) -> list[Proposal]:
        return self._run(req.proposals(status, limit))

    def proposal(self, proposal_id: str) -> Proposal:
        return self._run(req.proposal(proposal_id))

    def approve(
        self,
        proposal_id: str,
        *,
        only: Sequence[str] | None = None,
        edits: Mapping[str, str] | None = None,
        actor: str = "api",
    ) -> Proposal:
        return self._run(req.approve(proposal_id, only, edits, actor))

    def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        return self._run(req.reject(proposal_id, reason, actor))

    def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        return self._run(req.revert(proposal_id, actor))

    def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        return self._run(req.dreams(limit))

    def core_memory(self) -> str:
        return self._run(req.core_memory())

    def rescreen(self, *, dry_run: bool = False) -> dict[str, int]:
        return self._run(req.rescreen(dry_run))

    def apply_retention(
        self, *, older_than_days: float | None = None, dry_run: bool = False
    ) -> dict[str, int]:
        return self._run(req.apply_retention(older_than_days, dry_run))

    def stats(self) -> dict[str, Any]:
        return self._run(req.stats())

    def close(self) -> None:
        """Close the connections (a client passed in stays open: it is the caller's)."""
        if self._owned:
            self._client.close()

    def __enter__(self) -> RemoteBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
