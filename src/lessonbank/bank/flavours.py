"""Where LessonBank and AsyncLessonBank really differ, written by hand: how a service call is made,
where the worker runs, and closing.

The bank's operations are written once, as coroutines, in :mod:`.aio` on :class:`AsyncBankBase`;
:mod:`.sync` is generated from them (``scripts/unasync.py``) on :class:`SyncBankBase`. A generated
method calls ``self._call(service_method, *args)`` (``await``-ed in the source) and runs a coroutine
with ``self._run_coroutine(coro)``; each base below gives those their flavour's meaning.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from lessonbank.bank.base import BankBase
from lessonbank.llm.base import run_sync

if TYPE_CHECKING:
    import asyncio

    from lessonbank.jobs import ThreadGate, Worker, WorkerThread

# asyncio and the worker (lessonbank.jobs) are imported where they are used: a process that opens a
# LessonBank to recall, and starts no worker, loads neither.

P = ParamSpec("P")
R = TypeVar("R")


class AsyncBankBase(BankBase):
    """AsyncLessonBank's flavour: a service call runs in a thread (the services block on the store),
    so the caller's event loop stays free; the worker runs as a task on that loop."""

    _worker: Worker | None
    _task: asyncio.Task[None] | None

    def _start(self) -> None:
        from lessonbank.jobs import ThreadGate

        self._worker = None
        self._task = None
        # Threads cannot be cancelled: close() waits for the store calls still running in them.
        self._gate = ThreadGate()

    async def _call(self, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        import asyncio

        return await asyncio.to_thread(self._gate.call, call, *args, **kwargs)

    async def _run_coroutine(self, coro: Coroutine[Any, Any, R]) -> R:
        return await coro

    def _kick(self) -> None:
        if not self._runs_worker:
            return
        import asyncio
        import contextvars

        from lessonbank.jobs import current_gate

        if self._task is None or self._task.done():
            if self.reflection_llm is not None:
                self.store.release_waiting([self.namespace])
            self._worker = self.services.new_worker([self.namespace])
            context = contextvars.copy_context()
            context.run(current_gate.set, self._gate)  # the worker's jobs run their threads through it
            self._task = asyncio.get_running_loop().create_task(self._worker.run(), context=context)
        assert self._worker is not None
        self._worker.wake()

    def _running_worker(self) -> Worker | None:
        return self._worker

    def _wake(self) -> None:
        if self._worker is not None:
            self._worker.wake()

    async def close(self) -> None:
        """Stop the worker (jobs in flight go back to the queue), wait for the store calls still
        running in threads, and close the store."""
        import asyncio

        if self._worker is not None and self._task is not None:
            self._worker.stop()
            await asyncio.gather(self._task, return_exceptions=True)
        self._worker = self._task = None
        await asyncio.to_thread(self._gate.shut)
        await asyncio.to_thread(self.store.close)


class SyncBankBase(BankBase):
    """LessonBank's flavour: a service call is a plain call; the worker runs on a background thread
    (its own event loop), started at once when the namespace has jobs to run."""

    _thread: WorkerThread | None

    def _start(self) -> None:
        self._thread = None
        self._thread_lock = threading.Lock()
        # A worker that outlives stop()'s wait still holds the store: its calls pass this gate, made
        # with the first worker (a bank that never runs one never loads the worker's code).
        self._gate: ThreadGate | None = None
        self._closed = False
        if not self._runs_worker:
            return  # nothing to start: _kick() would do nothing, so the queue is not counted
        # What recorder.pending() reads, without building the recorder for a bank that only recalls.
        pending = self.store.count_jobs([self.namespace])
        if pending.get("queued") or (pending.get("waiting") and self.reflection_llm is not None):
            self._kick()

    def _call(self, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return call(*args, **kwargs)

    def _run_coroutine(self, coro: Coroutine[Any, Any, R]) -> R:
        return run_sync(coro)

    def _kick(self) -> None:
        if not self._runs_worker:
            return
        with self._thread_lock:
            if self._thread is None or not self._thread.thread.is_alive():
                # Jobs recorded while no LLM was configured become runnable now, before flush() looks.
                if self.reflection_llm is not None:
                    self.store.release_waiting([self.namespace])
                from lessonbank.jobs import ThreadGate, WorkerThread

                if self._gate is None:
                    self._gate = ThreadGate()
                    if self._closed:
                        self._gate.shut()  # kicked after close(): the worker's store calls are refused
                self._thread = WorkerThread(self.services.new_worker([self.namespace]), self._gate)
        self._thread.wake()

    def _running_worker(self) -> Worker | None:
        thread = self._thread
        return thread.worker if thread is not None else None

    def _wake(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.wake()

    def close(self) -> None:
        """Stop the worker (jobs in flight go back to the queue), wait for the store calls its jobs
        still run in threads, and close the store."""
        with self._thread_lock:
            thread, self._thread = self._thread, None
            gate, self._closed = self._gate, True
        if thread is not None:
            thread.stop()
        if gate is not None:
            gate.shut()
        self.store.close()
