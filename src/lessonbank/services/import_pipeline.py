"""An import written by this process while worker processes prepare the batches after it.

Preparing a batch (:func:`~lessonbank.services.import_records.prepare_batch`: validation, redaction,
the injection screen, the store's rows and term vectors) is pure Python and most of an import's CPU;
threads would share one interpreter lock, so other processes do it. The workers (:data:`WORKERS`) are
started once per import, and only for an import of :data:`MIN_BATCHES` batches or more; each is a plain
``python -c`` child (not ``multiprocessing``: its ``spawn`` and ``forkserver`` run the caller's main
module again in the child, and ``fork`` copies a threaded server's locks). Batches travel pickled over
their pipes. This process writes, and prepares a batch itself only when its turn comes and no worker
could take it (until the workers have imported the library, or if they stop).

Invariants:

- The store sees what an import in one process gives it, in the same order: batches are written in
  the order read, each as one call, with the same lessons; counts and the logged skips (with their
  record numbers) are the same, and each batch's log records are logged just before it is written.
- Records are read lazily, at most :data:`AHEAD` batches ahead of the one being written.
- A failure keeps the batches before it, as an import in one process does: a record source that
  raises, after the batches read before are written; an error preparing a batch, when that batch's
  turn comes (it is prepared here again, so the error raised is the one this process would raise); a
  store error, at once. A worker that stops, or errs, costs nothing but time: what it held is prepared
  here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import SimpleQueue
from typing import IO, Any

from lessonbank.services.import_records import Batch, ImportJob, Prepared, prepare_batch

log = logging.getLogger("lessonbank")

# A smaller import is prepared here alone: a worker takes ~0.6-1 s of CPU to import the library, about
# what preparing three batches takes, so it would be ready only as such an import ends.
MIN_BATCHES = 4
# Batches read and not yet written, at most (the one written next and three at the workers); not below
# MIN_BATCHES, so the first read tells whether to start workers.
AHEAD = 4
WORKER_QUEUE = 2  # batches handed to a worker and not yet answered, at most
# Preparing processes per import (``Settings.import_workers`` overrides it): with two, this process
# mostly writes while the system shares the cores among the three (one worker left this process
# preparing a third of the batches besides writing).
WORKERS = 2 if (os.cpu_count() or 1) >= 2 else 0
# Preparing processes alive at once in this process, over every import it runs: a server handling
# several import requests together would otherwise start two per request. An import that finds
# none left prepares its batches itself, as a small one does; more processes than cores gain nothing.
PROCESS_LIMIT = max(WORKERS, os.cpu_count() or 1)


class _Budget:
    """How many preparing processes this process may still start (:data:`PROCESS_LIMIT` in all)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def take(self, wanted: int) -> int:
        with self._lock:
            granted = max(0, min(wanted, PROCESS_LIMIT - self.running))
            self.running += granted
            return granted

    def give_back(self, count: int) -> None:
        with self._lock:
            self.running -= count


BUDGET = _Budget()


class _Slot:
    """One batch on its way: read, prepared (here or by a worker), written."""

    __slots__ = ("at_worker", "batch", "error", "here_only", "logs", "prepared")

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.prepared: Prepared | None = None
        self.error: Exception | None = None  # raised when the batch's turn comes
        self.logs: list[logging.LogRecord] = []  # made while preparing it here
        self.at_worker = False
        self.here_only = False  # its records cannot travel (they do not pickle)


class _Held(logging.Filter):
    """This thread's records of the ``lessonbank`` logger, held back (the others pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.records.append(record)
        return False


Answer = tuple[str, Any] | None  # ("ready", None), ("ok", Prepared), ("error", text); None: it stopped


class Worker:
    """A preparing process of one import, and the two threads that feed it and read its answers
    (into ``inbox``, shared by the import's workers, each answer with the worker it came from)."""

    def __init__(self, job: ImportJob, inbox: SimpleQueue[tuple[Worker, Answer]]) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where this lessonbank is imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            # not ``-m``: its classes must pickle under their module's name, not ``__main__``
            [sys.executable, "-c", "from lessonbank.services.import_records import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.sent: deque[_Slot] = deque()  # handed over, not yet answered, in order
        self.ready = False  # it has imported the library: until then it is given nothing
        self.stopped = False
        self._outbox: SimpleQueue[bytes | None] = SimpleQueue()
        self._inbox = inbox
        assert self.process.stdin is not None and self.process.stdout is not None
        self._threads = [
            threading.Thread(target=self._send, args=(self.process.stdin,), daemon=True),
            threading.Thread(target=self._receive, args=(self.process.stdout,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        self._outbox.put(pickle.dumps((job, log.getEffectiveLevel()), pickle.HIGHEST_PROTOCOL))

    def give(self, slot: _Slot) -> None:
        """Hand ``slot`` over, unless its records cannot be pickled (it is then prepared here)."""
        try:
            data = pickle.dumps(slot.batch, pickle.HIGHEST_PROTOCOL)
        except Exception:
            slot.here_only = True
            return
        slot.at_worker = True
        self.sent.append(slot)
        self._outbox.put(data)

    def take(self, answer: Answer) -> None:
        """One answer of this worker's, in the order its batches were sent."""
        if answer is None:
            if not self.stopped:
                log.warning("import: a preparing process stopped; its batches are prepared in this one")
            self.stopped = True
            for slot in self.sent:
                slot.at_worker = False
            self.sent.clear()
            return
        kind, value = answer
        if kind == "ready":
            self.ready = True
            return
        slot = self.sent.popleft()
        slot.at_worker = False
        if kind == "ok":
            slot.prepared = value
        else:  # prepared here when its turn comes, so the error raised is this process's
            slot.here_only = True

    def close(self) -> None:
        self._outbox.put(None)
        if self.process.poll() is None:
            self.process.terminate()  # it holds nothing but batches already written or dropped
        self.process.wait()
        for thread in self._threads:
            thread.join()
        assert self.process.stdout is not None
        self.process.stdout.close()

    def _send(self, pipe: IO[bytes]) -> None:
        try:
            while (data := self._outbox.get()) is not None:
                pipe.write(data)
                pipe.flush()
        except OSError:  # the worker has stopped: _receive says so
            pass
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def _receive(self, pipe: IO[bytes]) -> None:
        try:
            while True:
                self._inbox.put((self, pickle.load(pipe)))
        except Exception:  # end of its output: it stopped, or was stopped
            self._inbox.put((self, None))


class Workers:
    """The preparing processes of one import: ``count``, or as many as this process's budget
    (:data:`BUDGET`) has left, or none where they cannot start."""

    def __init__(self, job: ImportJob, count: int) -> None:
        self.inbox: SimpleQueue[tuple[Worker, Answer]] = SimpleQueue()
        self.all: list[Worker] = []
        self._granted = BUDGET.take(count)
        try:
            for _ in range(self._granted):
                worker = start_worker(job, self.inbox)
                if worker is None:
                    break
                self.all.append(worker)
        except BaseException:  # the import never sees this object: stop what started, give all back
            self.close()
            raise

    def hand_over(self, pending: deque[_Slot]) -> None:
        """Give the batches no one prepares yet, in order, to the ready workers with room."""
        for slot in pending:
            if not _unsent(slot) or slot.here_only:
                continue
            free = [w for w in self.all if w.ready and not w.stopped and len(w.sent) < WORKER_QUEUE]
            if not free:
                return
            min(free, key=lambda w: len(w.sent)).give(slot)

    def collect(self, *, wait: bool) -> None:
        """Take the answers in, waiting for one when ``wait`` and any worker may still answer."""
        while True:
            if self.inbox.empty() and not (wait and any(not w.stopped for w in self.all)):
                return
            worker, answer = self.inbox.get()
            worker.take(answer)
            wait = False

    def close(self) -> None:
        try:
            for worker in self.all:
                worker.close()
        finally:
            BUDGET.give_back(self._granted)
            self._granted = 0


def start_worker(job: ImportJob, inbox: SimpleQueue[tuple[Worker, Answer]]) -> Worker | None:
    """A worker for ``job``, or None when none can be started (the import is then prepared here)."""
    if not sys.executable:
        return None
    try:
        return Worker(job, inbox)
    except OSError as exc:
        log.warning("import: no preparing process (%s); preparing in this one", exc)
        return None


def pipelined_import(
    batches: Iterator[Batch],
    job: ImportJob,
    write: Callable[[Any], tuple[int, int]],
    *,
    workers: int | None = None,
    on_written: Callable[[dict[str, int]], None] | None = None,
) -> dict[str, int]:
    """Prepare and write ``batches`` in order (``write`` takes a batch's payload, returns added and
    reinforced), preparing ahead in ``workers`` processes (default :data:`WORKERS`; 0: none) when the
    import is large enough.
    Returns the counts ``added``, ``reinforced``, ``skipped``; ``on_written`` is handed a copy of them
    after each batch is written (what is kept should a later batch fail)."""
    counts = {"added": 0, "reinforced": 0, "skipped": 0}
    count = WORKERS if workers is None else workers
    pending: deque[_Slot] = deque()
    helpers: Workers | None = None
    read_error: Exception | None = None
    try:
        while True:
            while read_error is None and len(pending) < AHEAD:
                try:
                    pending.append(_Slot(next(batches)))
                except StopIteration:
                    break
                except Exception as exc:  # raised once the batches read before it are written
                    read_error = exc
            if not pending:
                break
            if helpers is None and len(pending) >= MIN_BATCHES and count > 0:
                helpers = Workers(job, count)
            if helpers is not None:
                helpers.collect(wait=False)
                helpers.hand_over(pending)
            head = pending[0]
            if head.prepared is None and head.error is None:
                if _unsent(head):  # no worker could take it (none ready yet, none left, or it errs there)
                    _prepare_here(head, job)
                elif helpers is not None:
                    helpers.collect(wait=True)
                continue
            pending.popleft()
            _write(head, write, counts)
            if on_written is not None:
                on_written(dict(counts))
    finally:
        if helpers is not None:
            helpers.close()
    if read_error is not None:
        raise read_error
    return counts


def _unsent(slot: _Slot) -> bool:
    return slot.prepared is None and slot.error is None and not slot.at_worker


def _prepare_here(slot: _Slot, job: ImportJob) -> None:
    """Prepare ``slot`` in this process, its log records held for its turn."""
    held = _Held()
    log.addFilter(held)
    try:
        slot.prepared = prepare_batch(job, slot.batch)
    except Exception as exc:
        slot.error = exc
    finally:
        log.removeFilter(held)
        slot.logs = held.records


def _write(slot: _Slot, write: Callable[[Any], tuple[int, int]], counts: dict[str, int]) -> None:
    for record in slot.logs:
        logging.getLogger(record.name).handle(record)
    if slot.error is not None:
        raise slot.error
    assert slot.prepared is not None
    payload, skipped, logs = slot.prepared
    for name, level, message in logs:
        logging.getLogger(name).log(level, "%s", message)
    counts["skipped"] += skipped
    if payload is not None:
        added, reinforced = write(payload)
        counts["added"] += added
        counts["reinforced"] += reinforced
