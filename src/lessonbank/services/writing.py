"""Lessons written outside a job: added by hand, imported, or learned in the Reflexion loop.

The store's transaction applies add / reinforce / supersede (see :mod:`lessonbank.lessons`); this service
finds vector near-duplicates first when an embedder is configured, and embeds what was written.
Every lesson, whatever its source (reflected, added by hand, imported), passes :func:`guarded`:
secrets redacted, and a lesson that reads as instructions to the model (see
:mod:`lessonbank.injection`) written ``quarantined``: kept for a person to approve, never recalled,
and taking no room in a pool. A lesson written for an agent listed in ``untrusted_agents`` (by a
reflection job, the Reflexion loop, ``add_lesson`` or an import) arrives quarantined too (:func:`untrusted`), for
a person or the next consolidation cycle to review.
An embedding failure never loses a lesson: it is logged, and ``embed_missing()`` catches up.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from lessonbank.errors import ConfigError, InputError
from lessonbank.models import AuditAction, Episode, Lesson, LessonKind
from lessonbank.ports import LessonStore, Placement, VectorStore, WriteResult
from lessonbank.provenance import of_task
from lessonbank.retrieval import Retriever
from lessonbank.retrieval.dedup import place_by_vector
from lessonbank.services.gate import guarded, untrusted
from lessonbank.services.lifecycle import Lifecycle
from lessonbank.services.pools import Pools
from lessonbank.services.scope import Scope, check_text_arg
from lessonbank.services.transfer import IMPORT_BATCH, batched

log = logging.getLogger("lessonbank")
__all__ = ["MANUAL_TAGS", "LessonIntake", "guarded", "stamp_reflected", "untrusted"]

MANUAL_TAGS = ("reflexion", "trigger:manual", "user-supplied")


def _texts(lesson: Lesson) -> tuple[Any, ...]:
    """What redaction may change in a lesson (the quarantine reason aside)."""
    fields = ("content", "situation", "mistake", "correction", "learned_from", "tags")
    metadata = {key: value for key, value in lesson.metadata.items() if key != "quarantine_reason"}
    return (*(getattr(lesson, name) for name in fields), metadata)


def stamp_reflected(
    lessons: Iterable[Lesson], episode: Episode, at: datetime, *, reflection_id: str | None = None
) -> list[Lesson]:
    """Lessons a reflector made of ``episode``, ready to write: provenance and times set (and the
    reflection they came from, when it is stored), then :func:`guarded`."""
    update: dict[str, Any] = {"created_at": at, "updated_at": at}
    if reflection_id is not None:
        update["reflection_id"] = reflection_id
    return [
        guarded(
            lesson.model_copy(update={**update, "learned_from": lesson.learned_from or of_task(episode.task)})
        )
        for lesson in lessons
    ]


class LessonIntake:
    """The write path for lessons that do not come from a job's result."""

    def __init__(self, scope: Scope, *, retriever: Retriever, pools: Pools) -> None:
        self.scope = scope
        self.retriever = retriever
        self.pools = pools

    def add_lesson(
        self,
        text: str,
        *,
        tags: Iterable[str],
        kind: LessonKind,
        task_type: str | None,
        agent: str | None,
        goal_id: str | None,
        importance: float,
        pinned: bool,
        learned_from: str | None = None,
    ) -> Lesson:
        """A lesson written by hand (no LLM), tagged ``reflexion``, ``trigger:manual``, ``user-supplied``."""
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                "lesson text is empty; write the lesson, e.g. "
                "'when editing large Go files use Edit, not full rewrite'",
                field="text",
            )
        if isinstance(tags, str):
            raise InputError("tags must be a list of strings, not one string", field="tags")
        if learned_from is not None:
            check_text_arg(learned_from, "learned_from")
        fields = guarded(
            {
                "namespace": self.scope.namespace,
                "kind": kind,
                "content": text,
                "trigger": "manual",
                "tags": [*MANUAL_TAGS, *tags],
                "task_type": task_type,
                "agent": agent,
                "goal_id": goal_id,
                "importance": importance,
                "confidence": 0.8,
                "source": "manual",
                "pinned": pinned,
                "created_at": self.scope.now(),
                "updated_at": self.scope.now(),
                "learned_from": learned_from,
            }
        )
        lesson = untrusted(fields, self.scope.settings.untrusted)
        [result] = self.write([lesson])
        return result.lesson

    def write_reflected(self, lessons: Sequence[Lesson]) -> list[WriteResult]:
        """Freshly reflected lessons (see :func:`stamp_reflected`) placed in their pools, then written."""
        if not lessons:
            return []
        agents = self.scope.settings.untrusted
        return self.write([untrusted(lesson, agents) for lesson in lessons], place=self.pools.placement())

    def write(self, lessons: Sequence[Lesson], *, place: Placement | None = None) -> list[WriteResult]:
        """Write lessons outside a job, in one transaction (``place`` readies them for their pools
        inside it): vector dedup first (with an embedder), then their vectors."""
        if self.retriever.embedder is not None and lessons:
            lessons = place_by_vector(self.retriever, lessons, self.scope.settings.dedup_cosine)
        store: LessonStore = self.scope.store
        if place is None and len(lessons) == 1:
            results = [store.write_lesson(lessons[0])]
        else:
            results = store.write_lessons(lessons, place=place) if lessons else []
        self.embed_written(results)
        return results

    def embed_written(self, results: Sequence[WriteResult]) -> None:
        """Vectors for lessons just written; a failure is logged, and ``embed_missing`` catches up."""
        if self.retriever.embedder is None or not results:
            return
        try:
            self.retriever.embed_lessons([result.lesson for result in results])
        except Exception as exc:
            log.warning(
                "embedding %d lesson(s) failed (%s: %s); run embed_missing() later",
                len(results),
                type(exc).__name__,
                exc,
            )

    def embed_missing(self, batch: int = 1_000) -> int:
        """Embed every lesson of the namespace that has no vector for the configured embedder.

        Pages follow a key (the last lesson of the page before), so the thousandth page costs what
        the first did. A pass that embedded something is followed by another from the start: a
        lesson written behind the key while it ran (an older ``created_at``, or written by another
        process without an embedder) is found there. It ends on a pass that finds nothing (one count
        when nothing is missing) or embeds nothing (what is left cannot be written: deleted meanwhile).
        """
        embedder = self.retriever.embedder
        if embedder is None:
            raise ConfigError(
                "no embedder configured; open the bank with embedder='minilm' or set LESSONBANK_EMBEDDER"
            )
        done = 0
        vectors: VectorStore = self.scope.store
        after: str | None = None
        embedded = False  # by the pass under way
        while True:
            missing = vectors.lessons_missing_vectors(self.scope.namespace, embedder.name, batch, after)
            if not missing:
                if after is None or not embedded:
                    return done
                after, embedded = None, False  # one more pass, from the start
                continue
            written = self.retriever.embed_lessons(missing)
            done += written
            embedded = embedded or written > 0
            after = missing[-1].id

    def import_lessons(
        self,
        records: Iterable[Lesson | dict[str, Any]],
        *,
        worker: bool = True,
        on_written: Callable[[dict[str, int]], None] | None = None,
    ) -> dict[str, int]:
        """Bulk-add lessons (same content reinforces). Invalid records are skipped and counted.

        ``records`` is read lazily and written :data:`IMPORT_BATCH` at a time, so an import of any size
        holds a few batches in memory; should ``records`` raise, the batches before are kept. An
        import of a few batches or more is prepared in worker processes while this one writes
        (:mod:`~lessonbank.services.import_pipeline`; how many: ``Settings.import_workers``), unless
        ``worker`` is false. ``on_written`` is handed the counts so far after each batch is written."""
        from lessonbank.services.import_pipeline import pipelined_import
        from lessonbank.services.import_records import ImportJob

        store = self.scope.store
        # A store may make its rows apart from its transaction (a picklable function, run by the worker).
        preparer = getattr(store, "import_preparer", None)
        prepare = preparer() if preparer is not None else None
        write = store.import_prepared if prepare is not None else store.import_lessons  # type: ignore[attr-defined]
        job = ImportJob(self.scope.namespace, self.scope.settings.untrusted, prepare)
        # A store may prepare for the whole import (SQLite builds some indexes once, at the end).
        bulk = getattr(store, "bulk_import", None)
        with bulk() if bulk is not None else contextlib.nullcontext():
            counts = pipelined_import(
                batched(enumerate(records, 1), IMPORT_BATCH),
                job,
                write,
                workers=self.scope.settings.import_workers if worker else 0,
                on_written=on_written,
            )
        if self.retriever.embedder is not None and counts["added"]:
            counts["embedded"] = self.embed_missing()
        return counts

    def rescreen(self, lessons: Iterable[Lesson], *, dry_run: bool = False) -> dict[str, int]:
        """Pass stored ``lessons`` (the namespace's, e.g. ``Catalog.marked_lessons``) through today's
        gate (:func:`guarded`): a lesson written before a redaction pattern or an injection rule
        existed gets its secrets redacted, or is quarantined. Returns how many were ``checked``,
        ``redacted`` and ``quarantined``; with ``dry_run``, only counts. Running it again changes nothing.

        A lesson whose redacted text is the same as another stored lesson's is that lesson: the stored
        one is reinforced and the raw copy removed, so no secret stays and nothing learned is lost."""
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be true or false, got {dry_run!r}", field="dry_run")
        store: LessonStore = self.scope.store
        counts = {"checked": 0, "redacted": 0, "quarantined": 0}
        for stored in lessons:
            counts["checked"] += 1
            gated = guarded(stored)
            redacted = _texts(gated) != _texts(stored)
            quarantined = gated.status == "quarantined" and stored.status != "quarantined"
            counts["redacted"] += redacted
            counts["quarantined"] += quarantined
            if dry_run or not (redacted or quarantined):
                continue
            action: AuditAction = "quarantine" if quarantined else "edit"
            summary = f"rescreen: {'quarantined' if quarantined else 'secrets redacted'}"
            try:
                store.update_lesson(
                    gated, audit=Lifecycle(self.scope).entry(action, "rescreen", summary, stored.id)
                )
            except InputError:  # its redacted content is another stored lesson's: fold it in
                store.write_lesson(gated)
                store.delete_lesson(self.scope.namespace, stored.id)
        return counts
