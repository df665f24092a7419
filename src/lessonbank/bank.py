"""LessonBank and AsyncLessonBank: the two facades over one :class:`~lessonbank.engine.Engine`.

``record()`` only validates, redacts and writes the episode with its job in one transaction;
reflection happens in a worker (an asyncio task in a background thread for LessonBank, a
task on the caller's loop for AsyncLessonBank, or a separate ``lessonbank worker``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from lessonbank.config import Settings
from lessonbank.engine import Engine, ExportFormat
from lessonbank.errors import NotFoundError
from lessonbank.jobs import Worker
from lessonbank.llm import LLM
from lessonbank.loop.records import search_reflections
from lessonbank.models import ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.stores.base import LessonSort
from lessonbank.text import TokenCounter

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders import Embedder

log = logging.getLogger("lessonbank")

GoalState = Literal["completed", "failed"]


class LessonBank(Engine):
    """The synchronous bank. Reflections run on a background thread; ``flush()`` waits for them.

    >>> bank = LessonBank("sqlite:///bank.db", llm="openai:gpt-4o-mini", namespace="team-a")  # doctest: +SKIP
    """

    def __init__(
        self,
        db: str | None = None,
        *,
        llm: str | LLM | None = None,
        namespace: str | None = None,
        reflection_llm: str | LLM | None = None,
        settings: Settings | None = None,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], float] | None = None,
        worker: bool | None = None,
        embedder: str | Embedder | None = None,
        hyde: bool | None = None,
    ) -> None:
        super().__init__(
            db,
            llm=llm,
            namespace=namespace,
            reflection_llm=reflection_llm,
            settings=settings,
            token_counter=token_counter,
            clock=clock,
            worker=worker,
            embedder=embedder,
            hyde=hyde,
        )
        self._thread: _WorkerThread | None = None
        self._thread_lock = threading.Lock()
        pending = self._pending()
        if pending.get("waiting") or pending.get("queued"):
            self._kick()

    def _kick(self) -> None:
        if not (self.settings.worker and self.reflection_llm):
            return
        with self._thread_lock:
            if self._thread is None or not self._thread.thread.is_alive():
                # Jobs recorded while no LLM was configured become runnable now, before flush() looks.
                self.store.release_waiting([self.namespace])
                self._thread = _WorkerThread(self._new_worker([self.namespace]))
        self._thread.wake()

    def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        """Store an episode and, if the policy says so, queue its reflection. Never waits for an LLM."""
        stored, job = self._record(episode, context_ids)
        if job is not None:
            self._kick()
        return stored

    def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        """Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said.

        ``reflector`` defaults to the one the policy table gives the episode's situation.
        """
        decision, _ = self._reflect(episode_id, reflector)
        self._kick()
        return decision

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
        stored, job = self._finish_goal(
            goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent
        )
        if job is not None:
            self._kick()
        return stored

    def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        """Live goal insights by importance: the goal's, or (no goal) those of the 10 most recently reflected goals."""
        return self._insights(goal_id)

    def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        """Live rules (kind ``principle``), strategic first; ``agent=None`` lists every agent's."""
        return self._rules(agent, stream)

    def replay(self, *, task: str | None = None, task_type: str | None = None, k: int = 3) -> list[Lesson]:
        """Replay examples for a task: exact task type first, then keyword overlap, ≥ 1 failure when one matches."""
        return self._replay(task, task_type, k)

    def confirm_rule(self, rule_id: str) -> Lesson:
        """Mark a rule helpful: a confirmation that extends it and, across 4+ weeks, promotes it."""
        return self._confirm_rule(rule_id)

    def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The policy's latest decisions, newest first (reflect with which trigger and reflector, or skip and why)."""
        return self._decisions(agent, limit)

    def new_worker(self, namespaces: Sequence[str] | None = None) -> Worker:
        """A worker that runs this bank's reflection jobs (``namespaces=None``: every namespace).

        It is not started: ``await worker.run()`` (``until_idle=True`` to drain and return).
        """
        return self._new_worker(namespaces)

    def pending(self) -> dict[str, int]:
        """This namespace's jobs counted by status (``queued``, ``leased``, ``waiting``, ``dead``...)."""
        return self._pending()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until this namespace has no queued or running jobs. False on timeout or when jobs wait for an LLM."""
        self._kick()
        deadline = time.monotonic() + timeout
        while True:
            pending = self._pending()
            finishing = self._thread is not None and self._thread.worker.finishing > 0
            if not pending.get("queued") and not pending.get("leased") and not finishing:
                return not pending.get("waiting")
            if time.monotonic() >= deadline:
                return False
            if self._thread is not None:
                self._thread.wake()
            time.sleep(0.02)

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
        return self._add_lesson(
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
        filters = self._query(kind=kind, tags=tags, task_type=task_type, agent=agent, goal_id=goal_id)
        return self._recall(query, k, filters, mode, hyde)

    def embed_missing(self) -> int:
        """Embed every lesson that has no vector for the configured embedder; returns how many.

        Writes through the bank embed as they go; this catches up after an embedder is first
        configured, changed, or was unavailable. Content already embedded is never embedded twice.
        """
        return self._embed_missing()

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

        ``formats``: any of ``long_term_memory`` (default), ``past_reflections`` (insights of
        ``goal_id``), ``learned_rules`` (rules of ``agent``), ``replay`` (examples of ``task_type``).
        """
        filters = self._query(kind=kind, tags=tags)
        return self._context(
            task, budget_tokens, formats, filters, goal_id=goal_id, agent=agent, task_type=task_type
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
    ) -> list[Lesson]:
        return self.store.list_lessons(
            self._query(kind=kind, tags=tags, status=status), limit=limit, offset=offset, sort=sort
        )

    def get_lesson(self, lesson_id: str) -> Lesson:
        return self.store.get_lesson(lesson_id)

    def show(self, record_id: str) -> dict[str, Any]:
        return self._show(record_id)

    def forget(self, lesson_id: str) -> None:
        """Delete a lesson from this namespace. Raises NotFoundError if there is none with that id."""
        if not self.store.delete_lesson(self.namespace, lesson_id):
            raise NotFoundError("lesson", lesson_id)

    def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Bulk-add lessons (same content reinforces). Invalid records are skipped and counted."""
        return self._import(records)

    def export(self, format: ExportFormat = "json") -> str:
        return self._export(format)

    def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """Past loop reflections (AIWG records, newest first) by failure category, confidence, keywords."""
        return search_reflections(
            self,
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords,
            limit=limit,
        )

    def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        statuses = [status] if isinstance(status, str) else status
        return self.store.list_jobs(self.namespace, statuses, limit)

    def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead-lettered jobs (all, or the given ids). Returns how many."""
        count = self.store.retry_jobs(self.namespace, job_ids)
        self._kick()
        return count

    def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return self.store.purge_jobs(self.namespace, statuses)

    def stats(self) -> dict[str, Any]:
        return self._stats()

    def close(self) -> None:
        """Stop the worker (jobs in flight go back to the queue) and close the store."""
        with self._thread_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
        self.store.close()

    def __enter__(self) -> LessonBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _WorkerThread:
    """Runs a Worker on its own event loop in a daemon thread."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="lessonbank-worker", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.worker.run())
        except Exception:
            log.exception("lessonbank worker stopped unexpectedly")
        finally:
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    def wake(self) -> None:
        # A worker with every slot busy will look for work when a job ends: waking it would
        # only cost the caller a cross-thread call.
        if self.worker.has_capacity and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.worker.wake)

    def stop(self, timeout: float = 10.0) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.worker.stop)
        self.thread.join(timeout)


class AsyncLessonBank:
    """The same bank as coroutines. The worker runs as a task on the caller's event loop."""

    def __init__(
        self,
        db: str | None = None,
        *,
        llm: str | LLM | None = None,
        namespace: str | None = None,
        reflection_llm: str | LLM | None = None,
        settings: Settings | None = None,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], float] | None = None,
        worker: bool | None = None,
        embedder: str | Embedder | None = None,
        hyde: bool | None = None,
    ) -> None:
        self._core = Engine(
            db,
            llm=llm,
            namespace=namespace,
            reflection_llm=reflection_llm,
            settings=settings,
            token_counter=token_counter,
            clock=clock,
            worker=worker,
            embedder=embedder,
            hyde=hyde,
        )
        self.namespace = self._core.namespace
        self.settings = self._core.settings
        self.store = self._core.store
        self.retriever = self._core.retriever
        self._worker: Worker | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def embedder(self) -> Embedder | None:
        return self._core.embedder

    def _kick(self) -> None:
        core = self._core
        if not (core.settings.worker and core.reflection_llm):
            return
        if self._task is None or self._task.done():
            core.store.release_waiting([core.namespace])
            self._worker = core._new_worker([core.namespace])
            self._task = asyncio.get_running_loop().create_task(self._worker.run())
        assert self._worker is not None
        self._worker.wake()

    async def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        stored, job = await asyncio.to_thread(self._core._record, episode, context_ids)
        if job is not None:
            self._kick()
        return stored

    async def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        decision, _ = await asyncio.to_thread(self._core._reflect, episode_id, reflector)
        self._kick()
        return decision

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
        stored, job = await asyncio.to_thread(
            self._core._finish_goal,
            goal_id,
            title=title,
            status=status,
            outputs=list(outputs) if not isinstance(outputs, str) else outputs,
            errors=list(errors) if not isinstance(errors, str) else errors,
            agent=agent,
        )
        if job is not None:
            self._kick()
        return stored

    async def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return await asyncio.to_thread(self._core._insights, goal_id)

    async def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return await asyncio.to_thread(self._core._rules, agent, stream)

    async def replay(
        self, *, task: str | None = None, task_type: str | None = None, k: int = 3
    ) -> list[Lesson]:
        return await asyncio.to_thread(self._core._replay, task, task_type, k)

    async def confirm_rule(self, rule_id: str) -> Lesson:
        return await asyncio.to_thread(self._core._confirm_rule, rule_id)

    async def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._core._decisions, agent, limit)

    async def flush(self, timeout: float = 30.0) -> bool:
        self._kick()
        deadline = time.monotonic() + timeout
        while True:
            pending = await asyncio.to_thread(self._core._pending)
            finishing = self._worker is not None and self._worker.finishing > 0
            if not pending.get("queued") and not pending.get("leased") and not finishing:
                return not pending.get("waiting")
            if time.monotonic() >= deadline:
                return False
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
        return await asyncio.to_thread(
            self._core._add_lesson,
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
        filters = self._core._query(kind=kind, tags=tags, task_type=task_type, agent=agent, goal_id=goal_id)
        return await asyncio.to_thread(self._core._recall, query, k, filters, mode, hyde)

    async def embed_missing(self) -> int:
        return await asyncio.to_thread(self._core._embed_missing)

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
        filters = self._core._query(kind=kind, tags=tags)
        return await asyncio.to_thread(
            self._core._context,
            task,
            budget_tokens,
            formats,
            filters,
            goal_id=goal_id,
            agent=agent,
            task_type=task_type,
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
    ) -> list[Lesson]:
        query = self._core._query(kind=kind, tags=tags, status=status)
        return await asyncio.to_thread(self.store.list_lessons, query, limit=limit, offset=offset, sort=sort)

    async def get_lesson(self, lesson_id: str) -> Lesson:
        return await asyncio.to_thread(self.store.get_lesson, lesson_id)

    async def show(self, record_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._core._show, record_id)

    async def forget(self, lesson_id: str) -> None:
        if not await asyncio.to_thread(self.store.delete_lesson, self.namespace, lesson_id):
            raise NotFoundError("lesson", lesson_id)

    async def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        return await asyncio.to_thread(self._core._import, list(records))

    async def export(self, format: ExportFormat = "json") -> str:
        return await asyncio.to_thread(self._core._export, format)

    async def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return await asyncio.to_thread(
            search_reflections,
            self._core,
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords,
            limit=limit,
        )

    async def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        statuses = [status] if isinstance(status, str) else status
        return await asyncio.to_thread(self.store.list_jobs, self.namespace, statuses, limit)

    async def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        count = await asyncio.to_thread(self.store.retry_jobs, self.namespace, job_ids)
        self._kick()
        return count

    async def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return await asyncio.to_thread(self.store.purge_jobs, self.namespace, statuses)

    async def stats(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._core._stats)

    async def close(self) -> None:
        if self._worker is not None and self._task is not None:
            self._worker.stop()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker = self._task = None
        await asyncio.to_thread(self.store.close)

    async def __aenter__(self) -> AsyncLessonBank:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
