"""Durable job semantics and the worker that drains them.

A job is leased before it runs; the lease outlives the per-job timeout, so a live worker
never loses it, and a dead worker's jobs are picked up once their lease expires (at once
when the dead process was on this host). A worker that is stopped (``stop()``, or SIGTERM/SIGINT
in ``lessonbank worker``) leases nothing more, cancels the jobs it runs and hands back every job it
holds that did not finish, with its attempt refunded; a result already being written is written. A job that fails is retried with exponential
backoff and jitter, then dead-lettered with its last error. The result of a job (its
reflection and lessons) is written in the same transaction that marks it done, so a job
is never done twice and never half done.

A worker runs every kind of job (:data:`~lessonbank.models.JobKind`) it has a handler for: ``reflect``
(one episode) and ``consolidate`` (one namespace's consolidation cycle). A job of a kind it cannot
run waits (parked) for a worker that can. Which failures are retried depends on the kind (see
:func:`retryable`): a reflection is retried unless the provider refused for good; a cycle only on
what may pass (a transient LLM or store error), since a cycle that failed on, say, a
malformed model reply would fail the same way again and spend its tokens each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lessonbank.errors import ConfigError, LeaseLostError, LLMError, LLMTransientError, StoreError
from lessonbank.models import Job, Lesson, Reflection
from lessonbank.ports import Placement, WorkerQueue, WriteResult
from lessonbank.redact import redact
from lessonbank.retry import Backoff
from lessonbank.settings import Settings
from lessonbank.stores.leases import worker_owner

log = logging.getLogger("lessonbank.jobs")
T = TypeVar("T")

NO_LLM_DETAIL = "waiting: no LLM configured, set LESSONBANK_LLM"
# How often a stopping worker tries to hand a job back to a busy store before leaving it to its lease.
RELEASE_TRIES = 6


@dataclass
class JobResult:
    """What running a job produced: written atomically with the job's completion."""

    reflection: Reflection | None
    lessons: list[Lesson] = field(default_factory=list)
    detail: str = "done"
    # Readies the lessons for their pools inside the finishing transaction (see ``Pools.placement``).
    place: Placement | None = None


Handler = Callable[[Job], Awaitable[JobResult]]


class ThreadGate:
    """The store calls one bank runs in threads, which closing the bank waits for.

    A thread cannot be cancelled: a task cancelled while its ``asyncio.to_thread`` call runs (a
    stopping worker cancels its jobs) leaves that call running, and closing the store under it (SQLite
    closes every thread's connection) can crash the interpreter. :meth:`shut` lets no new call start
    and waits for those already running; a call that would start after it raises ``StoreError``.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._shut = False

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` here, counted; refused once the gate is shut."""
        with self._changed:
            if self._shut:
                raise StoreError("the bank is closed: no store call starts after close()")
            self._running += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def shut(self, report_after_s: float = 10.0) -> None:
        """Let no call start and wait until every running one has returned."""
        with self._changed:
            self._shut = True
            if not self._changed.wait_for(lambda: self._running == 0, report_after_s):
                log.warning("closing: waiting for %d store call(s) still running in threads", self._running)
                self._changed.wait_for(lambda: self._running == 0)


# The gate of the bank whose worker runs in this context (set by the bank that starts the worker).
current_gate: contextvars.ContextVar[ThreadGate | None] = contextvars.ContextVar(
    "lessonbank_gate", default=None
)


async def offload(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread`` for store work, counted by the current bank's :class:`ThreadGate` if any."""
    gate = current_gate.get()
    if gate is None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return await asyncio.to_thread(gate.call, fn, *args, **kwargs)


def retryable(job: Job, exc: BaseException) -> bool:
    """Whether another attempt of ``job`` may succeed where this one failed with ``exc``."""
    if job.kind == "consolidate":
        # Not a timeout: the cycle's thread cannot be cancelled and may still be running, and a
        # second attempt beside it would be two cycles of one namespace at once.
        return isinstance(exc, (LLMTransientError, StoreError))
    return not isinstance(exc, LLMError) or isinstance(exc, LLMTransientError)


def backoff_delay(attempt: int, settings: Settings, rng: random.Random | None = None) -> float:
    """Delay before retry number ``attempt`` (1-based): base × factor^(attempt−1), capped, ± jitter."""
    backoff = Backoff(
        settings.backoff_base_s, settings.backoff_max_s, settings.backoff_factor, settings.backoff_jitter
    )
    return backoff.delay(attempt, rng)


class Worker:
    """Leases and runs jobs until stopped; up to ``settings.worker_concurrency`` at once.

    ``namespaces=None`` serves every namespace in the store. ``handler`` runs every job, or is a
    handler per job kind. ``only`` (a job id) makes a worker that runs that one job and no other,
    and leaves waiting jobs as they are (a caller waiting for one job runs it in its own process
    without taking the rest of the queue).
    """

    def __init__(
        self,
        store: WorkerQueue,
        handler: Handler | Mapping[str, Handler],
        settings: Settings,
        *,
        namespaces: Sequence[str] | None = None,
        on_written: Callable[[list[WriteResult]], None] | None = None,
        only: str | None = None,
        releases_waiting: bool = True,
    ) -> None:
        self.store = store
        # Whether starting makes jobs that wait for an LLM runnable: not for a worker that has none.
        self.releases_waiting = releases_waiting
        self.handlers = dict(handler) if isinstance(handler, Mapping) else None
        self.handler = handler if not isinstance(handler, Mapping) else self._dispatch
        self.only = only
        self.on_written = on_written
        # Jobs whose result is committed but whose after-commit work (on_written) still runs:
        # flush() waits for these too, so "flushed" means the lessons are also searchable by vector.
        self.finishing = 0
        self.settings = settings
        self.namespaces = list(namespaces) if namespaces is not None else None
        self.owner = worker_owner()
        self.processed = 0
        self.released = 0  # jobs handed back unfinished when the worker stopped
        # Jobs this worker leased whose outcome is not recorded yet: a stop hands back what is left.
        self._leased: dict[str, Job] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._running: set[asyncio.Task[None]] = set()

    @property
    def has_capacity(self) -> bool:
        """Whether a new job could start now (callers skip waking a busy worker)."""
        return len(self._running) < self.settings.worker_concurrency

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(self, *, until_idle: bool = False) -> None:
        """Work until :meth:`stop` (or, with ``until_idle``, until nothing is runnable or in flight)."""
        unsubscribe = self._subscribe(asyncio.get_running_loop())
        try:
            if self.only is None and self.releases_waiting:
                await offload(self.store.release_waiting, self.namespaces)
            while not self._stopping:
                try:
                    started = await self._fill()
                    idle = until_idle and not started and not self._running
                    if idle and await offload(self._nothing_left):
                        return
                    if started:
                        continue
                    await self._sleep()
                except StoreError as exc:  # a locked or unreachable store: wait, then try again
                    log.warning(
                        "worker %s: store unavailable (%s); retrying in %.1fs",
                        self.owner,
                        exc,
                        self.settings.poll_interval_s,
                    )
                    await asyncio.sleep(self.settings.poll_interval_s)
        finally:
            if unsubscribe is not None:
                unsubscribe()
            await self._shutdown()

    def _subscribe(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None] | None:
        """Wake at once when the store announces a runnable job (PostgreSQL LISTEN/NOTIFY).

        Stores without announcements (``notifier`` None, e.g. SQLite) are polled every
        ``poll_interval_s``.
        """
        notifier = self.store.notifier
        if notifier is None:
            return None

        def announced() -> None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(self._wake.set)

        return notifier.subscribe_jobs(announced)

    async def _fill(self) -> bool:
        """Lease jobs while there is capacity; True when at least one was started."""
        started = False
        while len(self._running) < self.settings.worker_concurrency and not self._stopping:
            if self.only is not None:
                job = await offload(
                    self.store.lease_job_id, self.only, self.owner, self.settings.lease_seconds
                )
            else:
                job = await offload(
                    self.store.lease_job, self.owner, self.namespaces, self.settings.lease_seconds
                )
            if job is None:
                break
            self._leased[job.id] = job
            if self._stopping:  # the stop came while leasing: the job is handed back, not started
                break
            task = asyncio.create_task(self._run_job(job))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            task.add_done_callback(lambda _: self._wake.set())
            started = True
        return started

    async def _dispatch(self, job: Job) -> JobResult:
        """Run ``job`` with the handler of its kind; a kind without one waits for a worker that has it."""
        assert self.handlers is not None
        handler = self.handlers.get(job.kind)
        if handler is None:
            raise ConfigError(f"this worker runs no {job.kind} jobs; a worker of a bank that does will")
        return await handler(job)

    async def _sleep(self) -> None:
        timeout = self.settings.poll_interval_s
        next_due = await offload(self.store.next_run_after, self.namespaces)
        if next_due is not None:
            timeout = min(timeout, max(0.01, next_due - self.store.clock()))
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    def _nothing_left(self) -> bool:
        counts = self.store.count_jobs(self.namespaces)
        return not counts.get("queued") and not counts.get("leased")

    async def _run_job(self, job: Job) -> None:
        # Cancelled (a stop) while the handler runs: the job stays in _leased and _shutdown hands it back.
        try:
            result = await asyncio.wait_for(self.handler(job), self.settings.job_timeout_s)
        except Exception as exc:  # every failure is recorded on the job, none escapes the worker
            await self._to_end(job, offload(self._fail, job, exc))
            return
        self.finishing += 1
        try:
            await self._to_end(job, self._finish(job, result))
        finally:
            self.finishing -= 1

    async def _to_end(self, job: Job, outcome: Awaitable[None]) -> None:
        """Record a job's outcome to its end, even when a stop cancels the job meanwhile."""
        recording = asyncio.ensure_future(outcome)
        try:
            await asyncio.shield(recording)
        except asyncio.CancelledError:
            await asyncio.gather(recording, return_exceptions=True)
            raise
        finally:
            self._leased.pop(job.id, None)

    async def _finish(self, job: Job, result: JobResult) -> None:
        try:
            written = await offload(
                self.store.finish_job,
                job.id,
                self.owner,
                reflection=result.reflection,
                lessons=result.lessons,
                detail=result.detail,
                place=result.place,
            )
            self.processed += 1
        except LeaseLostError:
            log.warning("job %s finished after its lease was taken over; result dropped", job.id)
            return
        except Exception as exc:  # the result could not be written: a failed attempt like any other
            await offload(self._fail, job, exc)
            return
        if self.on_written is not None and written:
            # After the commit: the job is done whatever happens here (the callback logs its own failures).
            await offload(self.on_written, written)

    def _fail(self, job: Job, exc: BaseException) -> None:
        try:
            if isinstance(exc, ConfigError):  # e.g. no API key: the job waits until the setup is fixed
                log.error("job %s waits: %s", job.id, exc)
                self.store.park_job(job.id, self.owner, detail=redact(f"waiting: {exc}"))
            else:
                self._retry_or_bury(job, exc)
        except LeaseLostError:
            log.warning("job %s failed after its lease was taken over", job.id)
        except StoreError as exc_store:  # the lease will expire and another attempt will come
            log.error("job %s: could not record its failure (%s)", job.id, exc_store)

    def _retry_or_bury(self, job: Job, exc: BaseException) -> None:
        if isinstance(exc, TimeoutError):
            error = f"timed out after {self.settings.job_timeout_s:g}s"
        else:
            error = redact(f"{type(exc).__name__}: {exc}")
        again = retryable(job, exc)
        if job.kind == "consolidate" and not again:  # say why a cycle stopped at its first attempt
            error = f"cycle failed, not retried: {error}"
        retry_at = None
        if again and job.attempts < job.max_attempts:
            retry_at = self.store.clock() + backoff_delay(job.attempts, self.settings)
        level = logging.WARNING if retry_at is not None else logging.ERROR
        log.log(
            level,
            "job %s attempt %d/%d failed: %s%s",
            job.id,
            job.attempts,
            job.max_attempts,
            error,
            "" if retry_at is not None else " (dead-lettered)",
        )
        self.store.fail_job(job.id, self.owner, error=error, retry_at=retry_at)

    def _release(self, job: Job) -> None:
        """Hand a job back untouched (worker stopping mid-job): no attempt is spent.

        A busy store (another process writing) is tried again a few times; a job that still
        cannot be handed back is left to its lease, which other workers take over.
        """
        for attempt in range(RELEASE_TRIES):
            try:
                self.store.release_job(job.id, self.owner)
            except LeaseLostError:
                return
            except StoreError as exc:
                if attempt + 1 == RELEASE_TRIES:
                    log.error("job %s could not be handed back (%s); its lease will expire", job.id, exc)
                    return
                time.sleep(min(self.settings.poll_interval_s * 2**attempt, 1.0))
            else:
                self.released += 1
                return

    async def _shutdown(self) -> None:
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        for job in list(self._leased.values()):
            await offload(self._release, job)
            self._leased.pop(job.id, None)
        if self.released:
            log.info("worker %s handed back %d unfinished job(s)", self.owner, self.released)


class WorkerThread:
    """Runs a Worker on its own event loop in a daemon thread; ``gate`` counts its jobs' store calls."""

    def __init__(self, worker: Worker, gate: ThreadGate | None = None) -> None:
        self.worker = worker
        self.gate = gate
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="lessonbank-worker", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        current_gate.set(self.gate)  # this thread's own context: the worker's tasks inherit it
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
