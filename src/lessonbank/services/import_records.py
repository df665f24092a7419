"""The preparation of an import's records, in the importing process or in a worker process.

A batch of numbered records becomes what the store writes: each record validated, moved into the
import's namespace, secrets redacted, screened (:func:`~lessonbank.services.gate.guarded`,
:func:`~lessonbank.services.gate.untrusted`), then made into the store's rows by the store's own
preparer (``store.import_preparer()``: a picklable function, pure Python, no connection), or kept as
lessons for ``store.import_lessons`` when the store has none. A record that is not a lesson is skipped,
logged with its number. Nothing here touches the store, so it runs the same in either process.

Its :func:`main` is the worker that
:mod:`~lessonbank.services.import_pipeline` starts: it reads pickled ``(job, batch)`` messages on
stdin and, once it has imported the library and said so (``("ready", None)``), answers each batch on
stdout, in order, with what :func:`prepare_batch` returned and the log
records it made (the importing process logs them, in order, when it writes the batch), or the
error's text. It ends at the end of its input.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from lessonbank.models import Lesson
from lessonbank.services.gate import guarded, untrusted
from lessonbank.services.transfer import STATE_KEY

log = logging.getLogger("lessonbank")

_DERIVED = frozenset({"content_hash", STATE_KEY})
Record = Lesson | dict[str, Any]
Batch = list[tuple[int, Record]]  # records with their numbers (from 1) in the import


@dataclass(frozen=True)
class ImportJob:
    """What every batch of one import is prepared with (picklable: sent once to the worker)."""

    namespace: str
    untrusted: frozenset[str]
    # The store's preparer (lessons → what ``store.import_prepared`` writes), or None: lessons kept.
    prepare: Callable[[Sequence[Lesson]], Any] | None


class Prepared(NamedTuple):
    """A batch made ready: ``payload`` for the store (None when no record was a lesson), how many
    records were ``skipped``, and the log records preparing it made when made in a worker
    (``(logger name, level, message)``, logged by the importing process when it writes the batch)."""

    payload: Any
    skipped: int
    logs: list[tuple[str, int, str]]


def imported(record: Record, namespace: str, agents: frozenset[str]) -> Lesson:
    """A record to import, validated once, moved into ``namespace``, secrets redacted, and
    quarantined as any other write would be (instructions to the model, an untrusted agent)."""
    return untrusted(_validated(record, namespace), agents)


def _validated(record: Record, namespace: str) -> Lesson:
    if isinstance(record, Lesson):
        return guarded(record.model_copy(update={"namespace": namespace}))
    if not isinstance(record, dict):
        raise TypeError(f"a lesson to import is a dict or a Lesson, not {type(record).__name__}")
    # An export's mark (``state``) is derived from the fields kept, like the content hash.
    data = {key: value for key, value in record.items() if value is not None and key not in _DERIVED}
    data["namespace"] = namespace
    data.setdefault("source", "import")
    return guarded(data)


def prepare_batch(job: ImportJob, batch: Batch) -> Prepared:
    """``batch`` validated (skips logged with their record numbers) and made into the store's payload."""
    lessons: list[Lesson] = []
    skipped = 0
    for number, record in batch:
        try:
            lessons.append(imported(record, job.namespace, job.untrusted))
        except (ValueError, TypeError) as exc:
            skipped += 1
            log.warning("import: record %d skipped: %s", number, " ".join(str(exc).split())[:300])
    if not lessons:
        return Prepared(None, skipped, [])
    return Prepared(lessons if job.prepare is None else job.prepare(lessons), skipped, [])


class _Kept(logging.Handler):
    """The worker's log records, kept to travel back with the batch they belong to."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, record.levelno, record.getMessage()))


def main() -> None:
    """The worker: ``(job, level)`` first, then batches, each answered in order (see the module docstring)."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not land in the answers
    root = logging.getLogger("lessonbank")
    kept = _Kept()
    root.handlers[:] = [kept]
    root.propagate = False
    batches: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()

    def read() -> None:  # drained as it comes, so the importing process never waits to send
        try:
            while True:
                batches.put(pickle.load(source))
        except EOFError:
            pass
        finally:
            batches.put(None)

    sink.write(pickle.dumps(("ready", None)))  # imported: batches may come now
    sink.flush()
    job, level = pickle.load(source)
    root.setLevel(level)  # only what the importing process would log
    threading.Thread(target=read, daemon=True).start()
    try:
        while (batch := batches.get()) is not None:
            kept.records = []
            try:
                prepared = prepare_batch(job, batch)
                answer = pickle.dumps(("ok", prepared._replace(logs=kept.records)), pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # the importing process prepares this batch again, and raises
                answer = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            sink.write(answer)
            sink.flush()
    except BrokenPipeError:  # the importing process has stopped listening: nothing more to do
        pass
    os._exit(0)  # at once: the reading thread may be waiting on stdin still
