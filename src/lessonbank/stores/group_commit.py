"""Group commit: concurrent writers of one process share a transaction.

A store's writers (the server's request threads, a bank's callers) each hand their write to a
:class:`GroupCommit` and wait. The first to arrive while no batch is being written becomes the
*leader*: it takes every write queued so far (up to ``max_batch``), writes them all in one
transaction with ``write_all`` and hands each waiting writer its own result. Writes that arrive
while a batch is in flight queue for the next one, whose leader is the first of them. So one
commit (one fsync on PostgreSQL, one turn of SQLite's write lock) serves everyone who was waiting,
and a lone writer pays nothing extra: it leads a batch of one at once, without any timer.

Invariants:

- A caller returns only after the transaction holding its own write has committed (the same
  durability as writing alone: the store's settings are unchanged), or raises its own error.
- One bad write never fails its neighbours: when the shared transaction raises, it has rolled
  back whole and each write of the batch is retried alone with ``write_one``, so only the bad
  one raises, in its own caller.
- Writes are applied in arrival order, so a batch is equivalent to writing its items one after
  another; ``write_all`` must give the same results as ``write_one`` on each item in turn.
- Leadership always passes on: whatever the leader's write raised (even ``KeyboardInterrupt``),
  the waiting writers are answered and the next one leads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
R = TypeVar("R")

MAX_BATCH = 256  # bounds the transaction a leader holds the write lock for


class _Slot(Generic[Item, R]):
    """One writer's item, and what it gets back: its result, its error, or the lead."""

    __slots__ = ("done", "error", "item", "lead", "result", "settled")

    def __init__(self, item: Item) -> None:
        self.item = item
        # Held until the slot is answered: a bare lock, released once, is the cheapest one-shot
        # signal between threads (an Event is a condition variable written in Python).
        self.done = threading.Lock()
        self.done.acquire()
        self.lead = False
        self.result: R | None = None
        self.error: BaseException | None = None
        self.settled = False  # result or error is set

    def succeed(self, result: R) -> None:
        self.result, self.settled = result, True

    def fail(self, error: BaseException) -> None:
        self.error, self.settled = error, True

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set whenever error is not


class GroupCommit(Generic[Item, R]):
    """Write items one at a time from many threads, in shared transactions (see the module).

    ``write_all(items)``: one transaction for all of them, a result per item in order; it raises
    (having rolled back) if any item fails. ``write_one(item)``: one transaction for one item."""

    def __init__(
        self,
        write_all: Callable[[Sequence[Item]], Sequence[R]],
        write_one: Callable[[Item], R],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write_all = write_all
        self._write_one = write_one
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Slot[Item, R]] = []
        self._busy = False  # a leader is writing a batch
        self.batches = 0  # transactions written (shared or alone): for tests and benchmarks
        self.items = 0

    def __call__(self, item: Item) -> R:
        """Write ``item``; returns once it is committed (its result) or raises its own error."""
        slot: _Slot[Item, R] = _Slot(item)
        with self._lock:
            self._queue.append(slot)
            if self._busy:
                leading = False
            else:
                self._busy = leading = True
        if not leading:
            slot.done.acquire()
            if not slot.lead:
                return slot.outcome()
        self._lead()
        return slot.outcome()

    def _lead(self) -> None:
        with self._lock:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
        try:
            self._write(batch)
        except BaseException as exc:  # the leader's own thread was interrupted: nobody is left hanging
            for slot in batch:
                if not slot.settled:
                    slot.fail(exc)
            raise
        finally:
            with self._lock:
                self.batches += 1
                self.items += len(batch)
                successor = self._queue[0] if self._queue else None
                if successor is None:
                    self._busy = False
                else:
                    successor.lead = True
            for slot in batch:
                slot.done.release()
            if successor is not None:
                successor.done.release()

    def _write(self, batch: list[_Slot[Item, R]]) -> None:
        if len(batch) > 1:
            try:
                results = self._write_all([slot.item for slot in batch])
            except Exception:
                pass  # rolled back whole: each item alone below, so only the bad one fails
            else:
                if len(results) != len(batch):
                    raise RuntimeError(f"write_all gave {len(results)} results for {len(batch)} items")
                for slot, result in zip(batch, results, strict=True):
                    slot.succeed(result)
                return
        for slot in batch:
            try:
                slot.succeed(self._write_one(slot.item))
            except Exception as exc:
                slot.fail(exc)
