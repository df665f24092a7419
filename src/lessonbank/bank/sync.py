# Generated from src/lessonbank/bank/aio.py by scripts/unasync.py: do not edit.
# Edit the source, then run `python scripts/unasync.py` (tests/test_generated.py checks this file is current).
"""LessonBank: the synchronous facade; reflections run on a background thread."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lessonbank.bank.base import GoalState
from lessonbank.bank.flavours import SyncBankBase
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.ports import LessonSort
from lessonbank.proposals import DreamRun, Proposal

if TYPE_CHECKING:
    # Named in signatures only. What a method runs it imports there: a process that opens a bank to
    # recall loads neither the request models nor the worker, consolidation, expansion and export code.
    from lessonbank.jobs import Worker
    from lessonbank.services.expansion import ExpansionReport
    from lessonbank.services.transfer import ExportFormat, ExportTarget

FLUSH_POLL_S = 0.02  # how often flush() looks at the queue


class LessonBank(SyncBankBase):
    """A bank: record episodes (reflected on by a worker in the background), recall lessons, build
    prompt contexts, review consolidation. ``flush()`` waits for the worker.

    >>> bank = LessonBank("sqlite:///bank.db", llm="openai:gpt-4o-mini", namespace="team-a")  # doctest: +SKIP
    """

    def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        """Store an episode and, if the policy says so, queue its reflection. Never waits for an LLM."""
        return self._queued(self._call(self.services.recorder.record, episode, context_ids))

    def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        """Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said.

        ``reflector`` defaults to the one the policy table gives the episode's situation.
        """
        return self._queued(self._call(self.services.recorder.reflect, episode_id, reflector))

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
        """Report a goal's terminal state; its insight is reflected in the background (never waits)."""
        # Copied here, on the caller's side, before the service reads them (in a thread, when async).
        outputs = list(outputs) if not isinstance(outputs, str) else outputs
        errors = list(errors) if not isinstance(errors, str) else errors
        from lessonbank import requests as rq

        request = rq.FinishGoalRequest.of(locals())
        return self._queued(self._call(self.services.recorder.finish_goal, request))

    def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        """Live goal insights by importance: the goal's, or (no goal) those of the 10 most recently reflected goals."""
        return self._call(self.services.pools.insights, goal_id)

    def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        """Live rules (kind ``principle``), strategic first; ``agent=None`` lists every agent's."""
        return self._call(self.services.pools.rules, agent, stream)

    def replay(self, *, task: str | None = None, task_type: str | None = None, k: int = 3) -> list[Lesson]:
        """Replay examples for a task: exact task type first, then keyword overlap, ≥ 1 failure when one matches."""
        return self._call(self.services.pools.replay, task, task_type, k)

    def confirm_rule(self, rule_id: str) -> Lesson:
        """Mark a rule helpful: a confirmation that extends it and, across 4+ weeks, promotes it."""
        return self._call(self.services.pools.confirm_rule, rule_id)

    def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The policy's latest decisions, newest first (reflect with which trigger and reflector, or skip and why)."""
        return self._call(self.services.recorder.decisions, agent, limit)

    def new_worker(self, namespaces: Sequence[str] | None = None) -> Worker:
        """A worker that runs this bank's reflection jobs (``namespaces=None``: every namespace).

        It is not started: ``await worker.run()`` (``until_idle=True`` to drain and return).
        """
        return self.services.new_worker(namespaces)

    def pending(self) -> dict[str, int]:
        """This namespace's jobs counted by status (``queued``, ``waiting``, ``leased``, ``done``, ``dead``)."""
        return self._call(self.services.recorder.pending)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until this namespace has no queued or running jobs. False on timeout or when jobs wait for an LLM."""
        self._kick()
        deadline = time.monotonic() + timeout
        while (done := self._flush_look(deadline)) is None:
            time.sleep(FLUSH_POLL_S)
        return done

    def _flush_look(self, deadline: float) -> bool | None:
        """One look of :meth:`flush` (after a kick): its answer, or None while jobs are still to run
        before ``deadline`` (monotonic). The server waits between looks on its event loop, so a
        waiting client holds no thread."""
        from lessonbank.services.recording import flush_answer

        done = flush_answer(self.pending(), self._running_worker(), deadline)
        if done is None:
            self._wake()
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
        """Store a lesson you already know (no LLM). Tags ``reflexion``, ``trigger:manual``, ``user-supplied``.

        ``learned_from``: the task it was learned on, indexed with it so a similar task finds it.
        """
        return self._call(
            self.services.intake.add_lesson,
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
        """The ``k`` lessons most relevant to ``query``, best first.

        ``mode``: ``lexical``, ``vector``, ``hybrid``, or ``auto`` (the default: hybrid when an
        embedder is configured, else lexical). ``hyde`` overrides the bank's HyDE setting.
        """
        context = self.services.context
        filters = context.query(kind=kind, tags=tags, task_type=task_type, agent=agent, goal_id=goal_id)
        return self._call(context.recall, query, k, filters, mode, hyde)

    def expand(
        self,
        lesson_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        dry_run: bool = False,
        actor: str = "api",
    ) -> ExpansionReport:
        """Ask the LLM for 2-3 example tasks that need each lesson and index them with it (its
        provenance), so a task that looks like one of them finds the lesson: for lessons added by
        hand or imported, which have no task they were learned on. One call per lesson.

        ``lesson_ids``: those lessons (their examples are replaced); default: the live lessons without
        example tasks, newest first, at most ``limit`` (100). ``dry_run``: only the plan (lessons,
        tokens, cost at most), nothing sent. The report's ``plan`` is that plan in both cases.
        """
        expander = self.services.expansion
        lessons, report = self._call(expander.prepare, lesson_ids, limit)
        return report if dry_run else self._run_coroutine(expander.expand(lessons, report, actor=actor))

    def embed_missing(self) -> int:
        """Embed every lesson that has no vector for the configured embedder; returns how many.

        Writes through the bank embed as they go; this catches up after an embedder is first
        configured, changed, or was unavailable. Content already embedded is never embedded twice.
        """
        return self._call(self.services.intake.embed_missing)

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
        """A prompt block for ``task``, never over ``budget_tokens``; injection counts as use.

        ``formats``: any of ``long_term_memory``, ``past_reflections`` (insights of ``goal_id``),
        ``learned_rules`` (rules of ``agent``), ``replay`` (examples of ``task_type``); by default
        ``long_term_memory`` plus the section of each of ``goal_id`` / ``agent`` / ``task_type`` given.
        """
        context = self.services.context
        filters = context.query(kind=kind, tags=tags)
        return self._call(
            context.context,
            task,
            budget_tokens,
            formats,
            filters,
            goal_id=goal_id,
            agent=agent,
            task_type=task_type,
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
        """Stored lessons of this namespace; with ``tier`` (active, fading, dormant, archive) only
        those whose decay score is in that tier now, ``limit`` and ``offset`` counted within it."""
        query = self.services.context.query(kind=kind, tags=tags, status=status)
        return self._call(
            self.services.catalog.lessons, query, limit=limit, offset=offset, sort=sort, tier=tier
        )

    def get_lesson(self, lesson_id: str) -> Lesson:
        return self._call(self.services.catalog.get_lesson, lesson_id)

    def show(self, record_id: str) -> dict[str, Any]:
        return self._call(self.services.catalog.show, record_id)

    def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        """Delete a lesson from this namespace (audited as ``actor``). NotFoundError if there is none."""
        self._call(self.services.catalog.forget, lesson_id, actor=actor)

    def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        """Archive a lesson of this namespace (soft: kept, no longer recalled or injected), with an audit
        row naming ``actor`` and ``reason``; a no-op on an archived lesson. NotFoundError if absent."""
        return self._call(self.services.lifecycle.archive, lesson_id, reason=reason, actor=actor)

    def edit_lesson(
        self,
        lesson_id: str,
        *,
        pinned: bool | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        actor: str = "api",
    ) -> Lesson:
        """Pin or unpin a lesson, set its tags or importance; audited (its text is not edited in place)."""
        from lessonbank import requests as rq

        return self._call(self.services.lifecycle.edit, rq.EditLessonRequest.of(locals()))

    def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        """Make an archived lesson active again; for a quarantined or pending one this is the approval
        (audit action ``approve``). A no-op on an active lesson. NotFoundError if absent."""
        return self._call(self.services.lifecycle.restore, lesson_id, actor=actor)

    def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The audit log of this namespace (of one lesson when given), newest first: who changed what, when."""
        return self._call(self.services.lifecycle.audit, lesson_id=lesson_id, limit=limit)

    def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Bulk-add lessons, read and written 1,000 at a time (same content reinforces); invalid ones skipped."""
        return self._call(self.services.intake.import_lessons, records)  # read by the service, lazily

    def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return self._call(self.services.catalog.export, format, live_only=live_only)

    def export_to(self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False) -> int:
        """Stream :meth:`export` to a path (replaced once whole) or a text stream; returns the lesson count."""
        return self._call(self.services.catalog.export_to, dest, format, live_only=live_only)

    def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """Past loop reflections (AIWG records, newest first) by failure category, confidence, keywords."""
        from lessonbank.loop.records import search_reflections  # the loop package loads when it is used

        return self._call(
            search_reflections,
            self,
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords,
            limit=limit,
        )

    def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return self._call(self.services.recorder.jobs, status, limit)

    def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead-lettered jobs (all, or the given ids). Returns how many."""
        count = self._call(self.services.recorder.retry_jobs, job_ids)
        self._kick()
        return count

    def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return self._call(self.services.recorder.purge_jobs, statuses)

    def consolidate(self, *, dry_run: bool = False, wait: bool = True) -> Proposal | None:
        """Run one consolidation cycle: a pending proposal for a person to decide (None when there is
        nothing to propose). Nothing is ever applied here.

        The cycle is a ``consolidate`` job, one per namespace at a time (a cycle already queued or
        running is the one this call gets). ``wait=True`` returns its proposal once the job is done,
        running it in this process when the bank has no worker of its own (another worker may take
        it first); ``wait=False`` queues it for a worker and returns None. ``dry_run`` computes the
        proposal here and stores nothing. Over a daily cap: BudgetExceededError; a cycle that
        failed for good: CycleFailedError."""
        if dry_run is not False:
            return (self._call(self.services.consolidation.run, dry_run=dry_run))[1]
        from lessonbank.services.consolidation.cycle_queue import check_wait

        check_wait(wait)
        job = self._call(self.services.cycles.manual)
        self._kick()
        if not wait:
            return None
        # Waited for off the event loop when async: the loop stays free for the bank's own worker task.
        return self._call(self.services.cycles.wait, job, worker=self._helper_worker(job))

    def end_session(self, *, agent: str | None = None, session_id: str | None = None) -> Job | None:
        """A session ended: queue a consolidation cycle (trigger ``session_end``) and return its job
        (the one already queued or running, if any). Never waits. None when the circuit breaker or
        a daily cap refused it; the dream log says why."""
        job = self._call(self.services.cycles.end_session, agent=agent, session_id=session_id)
        if job is not None:
            self._kick()
        return job

    def proposals(self, *, status: str | Sequence[str] | None = None, limit: int = 50) -> list[Proposal]:
        return self._call(self.services.consolidation.proposals, status=status, limit=limit)

    def proposal(self, proposal_id: str) -> Proposal:
        return self._call(self.services.consolidation.proposal, proposal_id)

    def approve(
        self,
        proposal_id: str,
        *,
        only: Sequence[str] | None = None,
        edits: Mapping[str, str] | None = None,
        actor: str = "api",
    ) -> Proposal:
        """Apply a pending proposal (or ``only`` some of its operations, ``"core"`` naming its core
        memory rewrite), all or nothing, audited. ``edits``: operation id (or ``"core"``) → the text
        to write instead of the cycle's (approve with changes)."""
        from lessonbank import requests as rq

        return self._call(self.services.consolidation.approve, rq.ApproveRequest.of(locals()))

    def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        return self._call(self.services.consolidation.reject, proposal_id, reason=reason, actor=actor)

    def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        """Undo an applied proposal (its audit rows say what each lesson was)."""
        return self._call(self.services.consolidation.revert, proposal_id, actor=actor)

    def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        """The dream log: every consolidation cycle of this namespace, newest first."""
        return self._call(self.services.consolidation.dreams, limit=limit)

    def core_memory(self) -> str:
        """The namespace's core memory document (seed 002: Identity, Active Context, Persona,
        Critical Facts), as the last approved cycle wrote it; '' before that."""
        return self._call(self.services.consolidation.core_memory)

    def rescreen(self, *, dry_run: bool = False) -> dict[str, int]:
        """Redact and screen every stored lesson again with today's rules (run after an upgrade):
        secrets redacted, instruction-like lessons quarantined. Returns ``checked``, ``redacted``,
        ``quarantined``; ``dry_run`` only counts."""
        return self._call(
            self.services.intake.rescreen,
            (lesson for lesson, _ in self.services.catalog.marked_lessons()),
            dry_run=dry_run,
        )

    def apply_retention(
        self, *, older_than_days: float | None = None, dry_run: bool = False
    ) -> dict[str, int]:
        """Delete the episodes, reflections and done jobs past the retention settings (or older than
        ``older_than_days``); lessons are never deleted here. Returns how many of each went."""
        return self._call(self.services.retention.apply, older_than_days=older_than_days, dry_run=dry_run)

    def stats(self) -> dict[str, Any]:
        return self._call(self.services.catalog.stats)

    def __enter__(self) -> LessonBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
