"""LessonBank and AsyncLessonBank: two thin facades over one bank's services (:mod:`lessonbank.services`).

``record()`` only validates, redacts and writes the episode with its job in one transaction;
reflection happens in a worker (an asyncio task in a background thread for LessonBank, a
task on the caller's loop for AsyncLessonBank, or a separate ``lessonbank worker``).

The services are synchronous and thread-safe through the store; LessonBank calls them directly
and AsyncLessonBank from a thread, so the two can never drift apart in behaviour.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from lessonbank.jobs import Worker, WorkerThread
from lessonbank.llm import LLM
from lessonbank.loop.records import search_reflections
from lessonbank.models import ContextBlock, Decision, Episode, Hit, Job, Lesson, LessonKind
from lessonbank.ports import LessonSort, Store
from lessonbank.reflectors.base import Reflector
from lessonbank.retrieval import Retriever
from lessonbank.services.recording import flush_answer
from lessonbank.services.transfer import ExportFormat, ExportTarget
from lessonbank.services.wiring import Services, build_services
from lessonbank.settings import Settings
from lessonbank.text import TokenCounter

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders import Embedder

GoalState = Literal["completed", "failed"]
P = ParamSpec("P")
R = TypeVar("R")


def _in_thread(call: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``call`` as a coroutine that runs it in a thread (the services block on the store), so an
    AsyncLessonBank method makes the same service call as its LessonBank twin, only awaited."""

    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(call, *args, **kwargs)

    return run


class _Bank:
    """What both facades share: one constructor (the bank's services, built from its arguments)
    and the bank's parts, read from those services."""

    services: Services  # one object per concern; the Reflexion loop works through these

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
        self.services = build_services(
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
        self._start()

    def _start(self) -> None:
        """Facade-specific set-up, once the services exist."""

    def _kick(self) -> None:
        """Start this namespace's worker if it is not running, and wake it (each facade runs its own)."""

    def _queued(self, written: tuple[R, Job | None]) -> R:
        """What a write returns; when the write queued a reflection job, the worker is woken for it."""
        result, job = written
        if job is not None:
            self._kick()
        return result

    @property
    def settings(self) -> Settings:
        return self.services.scope.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        # Seen by every service, and by workers made from now on (the CLI tunes their concurrency).
        self.services.scope.settings = value

    @property
    def namespace(self) -> str:
        return self.services.scope.namespace

    @property
    def store(self) -> Store:
        return self.services.scope.store

    @property
    def clock(self) -> Callable[[], float]:
        return self.services.scope.clock

    @property
    def llm(self) -> LLM | None:
        return self.services.llm

    @property
    def reflection_llm(self) -> LLM | None:
        return self.services.reflection_llm

    @property
    def reflectors(self) -> dict[str, Reflector]:
        """The registered reflectors by name (the policy table's routes name them)."""
        return self.services.reflectors

    @property
    def retriever(self) -> Retriever:
        return self.services.retriever

    @property
    def embedder(self) -> Embedder | None:
        return self.services.retriever.embedder

    @property
    def count_tokens(self) -> TokenCounter:
        return self.services.count_tokens


class LessonBank(_Bank):
    """The synchronous bank. Reflections run on a background thread; ``flush()`` waits for them.

    >>> bank = LessonBank("sqlite:///bank.db", llm="openai:gpt-4o-mini", namespace="team-a")  # doctest: +SKIP
    """

    def _start(self) -> None:
        self._thread: WorkerThread | None = None
        self._thread_lock = threading.Lock()
        pending = self.pending()
        if pending.get("waiting") or pending.get("queued"):
            self._kick()

    def _kick(self) -> None:
        if not (self.settings.worker and self.reflection_llm):
            return
        with self._thread_lock:
            if self._thread is None or not self._thread.thread.is_alive():
                # Jobs recorded while no LLM was configured become runnable now, before flush() looks.
                self.store.release_waiting([self.namespace])
                self._thread = WorkerThread(self.new_worker([self.namespace]))
        self._thread.wake()

    def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        """Store an episode and, if the policy says so, queue its reflection. Never waits for an LLM."""
        return self._queued(self.services.recorder.record(episode, context_ids))

    def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        """Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said.

        ``reflector`` defaults to the one the policy table gives the episode's situation.
        """
        return self._queued(self.services.recorder.reflect(episode_id, reflector))

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
        return self._queued(
            self.services.recorder.finish_goal(
                goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent
            )
        )

    def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        """Live goal insights by importance: the goal's, or (no goal) those of the 10 most recently reflected goals."""
        return self.services.pools.insights(goal_id)

    def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        """Live rules (kind ``principle``), strategic first; ``agent=None`` lists every agent's."""
        return self.services.pools.rules(agent, stream)

    def replay(self, *, task: str | None = None, task_type: str | None = None, k: int = 3) -> list[Lesson]:
        """Replay examples for a task: exact task type first, then keyword overlap, ≥ 1 failure when one matches."""
        return self.services.pools.replay(task, task_type, k)

    def confirm_rule(self, rule_id: str) -> Lesson:
        """Mark a rule helpful: a confirmation that extends it and, across 4+ weeks, promotes it."""
        return self.services.pools.confirm_rule(rule_id)

    def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The policy's latest decisions, newest first (reflect with which trigger and reflector, or skip and why)."""
        return self.services.recorder.decisions(agent, limit)

    def new_worker(self, namespaces: Sequence[str] | None = None) -> Worker:
        """A worker that runs this bank's reflection jobs (``namespaces=None``: every namespace).

        It is not started: ``await worker.run()`` (``until_idle=True`` to drain and return).
        """
        return self.services.new_worker(namespaces)

    def pending(self) -> dict[str, int]:
        """This namespace's jobs counted by status (``queued``, ``waiting``, ``leased``, ``done``, ``dead``)."""
        return self.services.recorder.pending()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until this namespace has no queued or running jobs. False on timeout or when jobs wait for an LLM."""
        self._kick()
        deadline = time.monotonic() + timeout
        while True:
            done = flush_answer(self.pending(), self._thread.worker if self._thread else None, deadline)
            if done is not None:
                return done
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
        return self.services.intake.add_lesson(
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
        return context.recall(query, k, filters, mode, hyde)

    def embed_missing(self) -> int:
        """Embed every lesson that has no vector for the configured embedder; returns how many.

        Writes through the bank embed as they go; this catches up after an embedder is first
        configured, changed, or was unavailable. Content already embedded is never embedded twice.
        """
        return self.services.intake.embed_missing()

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
        return context.context(
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
        query = self.services.context.query(kind=kind, tags=tags, status=status)
        return self.services.catalog.lessons(query, limit=limit, offset=offset, sort=sort)

    def get_lesson(self, lesson_id: str) -> Lesson:
        return self.services.catalog.get_lesson(lesson_id)

    def show(self, record_id: str) -> dict[str, Any]:
        return self.services.catalog.show(record_id)

    def forget(self, lesson_id: str) -> None:
        """Delete a lesson from this namespace. Raises NotFoundError if there is none with that id."""
        self.services.catalog.forget(lesson_id)

    def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        """Bulk-add lessons, read and written 1,000 at a time (same content reinforces); invalid ones skipped."""
        return self.services.intake.import_lessons(records)

    def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return self.services.catalog.export(format, live_only=live_only)

    def export_to(self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False) -> int:
        """Stream :meth:`export` to a path (replaced once whole) or a text stream; returns the lesson count."""
        return self.services.catalog.export_to(dest, format, live_only=live_only)

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
        return self.services.recorder.jobs(status, limit)

    def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead-lettered jobs (all, or the given ids). Returns how many."""
        count = self.services.recorder.retry_jobs(job_ids)
        self._kick()
        return count

    def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return self.services.recorder.purge_jobs(statuses)

    def stats(self) -> dict[str, Any]:
        return self.services.catalog.stats()

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


class AsyncLessonBank(_Bank):
    """The same bank as coroutines. The worker runs as a task on the caller's event loop."""

    def _start(self) -> None:
        self._worker: Worker | None = None
        self._task: asyncio.Task[None] | None = None

    def _kick(self) -> None:
        if not (self.settings.worker and self.reflection_llm):
            return
        if self._task is None or self._task.done():
            self.store.release_waiting([self.namespace])
            self._worker = self.services.new_worker([self.namespace])
            self._task = asyncio.get_running_loop().create_task(self._worker.run())
        assert self._worker is not None
        self._worker.wake()

    async def record(
        self, episode: Episode | dict[str, Any], *, context_ids: Sequence[str] | None = None
    ) -> Episode:
        return self._queued(await _in_thread(self.services.recorder.record)(episode, context_ids))

    async def reflect(self, episode_id: str, *, reflector: str | None = None) -> Decision:
        return self._queued(await _in_thread(self.services.recorder.reflect)(episode_id, reflector))

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
            await _in_thread(self.services.recorder.finish_goal)(
                goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent
            )
        )

    async def insights(self, *, goal_id: str | None = None) -> list[Lesson]:
        return await _in_thread(self.services.pools.insights)(goal_id)

    async def rules(self, *, agent: str | None = None, stream: str | None = None) -> list[Lesson]:
        return await _in_thread(self.services.pools.rules)(agent, stream)

    async def replay(
        self, *, task: str | None = None, task_type: str | None = None, k: int = 3
    ) -> list[Lesson]:
        return await _in_thread(self.services.pools.replay)(task, task_type, k)

    async def confirm_rule(self, rule_id: str) -> Lesson:
        return await _in_thread(self.services.pools.confirm_rule)(rule_id)

    async def decisions(self, *, agent: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return await _in_thread(self.services.recorder.decisions)(agent, limit)

    async def new_worker(self, namespaces: Sequence[str] | None = None) -> Worker:
        """A worker that runs this bank's reflection jobs (``namespaces=None``: every namespace), not started."""
        return self.services.new_worker(namespaces)

    async def pending(self) -> dict[str, int]:
        return await _in_thread(self.services.recorder.pending)()

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
        return await _in_thread(self.services.intake.add_lesson)(
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
        return await _in_thread(context.recall)(query, k, filters, mode, hyde)

    async def embed_missing(self) -> int:
        return await _in_thread(self.services.intake.embed_missing)()

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
        return await _in_thread(context.context)(
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
    ) -> list[Lesson]:
        query = self.services.context.query(kind=kind, tags=tags, status=status)
        return await _in_thread(self.services.catalog.lessons)(query, limit=limit, offset=offset, sort=sort)

    async def get_lesson(self, lesson_id: str) -> Lesson:
        return await _in_thread(self.services.catalog.get_lesson)(lesson_id)

    async def show(self, record_id: str) -> dict[str, Any]:
        return await _in_thread(self.services.catalog.show)(record_id)

    async def forget(self, lesson_id: str) -> None:
        await _in_thread(self.services.catalog.forget)(lesson_id)

    async def import_lessons(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        return await _in_thread(self.services.intake.import_lessons)(records)  # read in the thread, lazily

    async def export(self, format: ExportFormat = "json", *, live_only: bool = False) -> str:
        return await _in_thread(self.services.catalog.export)(format, live_only=live_only)

    async def export_to(
        self, dest: ExportTarget, format: ExportFormat = "json", *, live_only: bool = False
    ) -> int:
        return await _in_thread(self.services.catalog.export_to)(dest, format, live_only=live_only)

    async def search_reflections(
        self,
        *,
        failure_category: str | Sequence[str] | None = None,
        min_confidence: float = 0.0,
        keywords: Sequence[str] = (),
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        return await _in_thread(search_reflections)(
            self,
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords,
            limit=limit,
        )

    async def jobs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[Job]:
        return await _in_thread(self.services.recorder.jobs)(status, limit)

    async def retry_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        count = await _in_thread(self.services.recorder.retry_jobs)(job_ids)
        self._kick()
        return count

    async def purge_jobs(self, *, statuses: Sequence[str] = ("done",)) -> int:
        return await _in_thread(self.services.recorder.purge_jobs)(statuses)

    async def stats(self) -> dict[str, Any]:
        return await _in_thread(self.services.catalog.stats)()

    async def close(self) -> None:
        if self._worker is not None and self._task is not None:
            self._worker.stop()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker = self._task = None
        await _in_thread(self.store.close)()

    async def __aenter__(self) -> AsyncLessonBank:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
