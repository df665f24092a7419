"""Reading the bank as a whole: list, get, show any record by id, forget, export (streamed), stats."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from lessonbank.errors import InputError, NotFoundError
from lessonbank.integrations.agent_files import write_export
from lessonbank.llm import LLM
from lessonbank.models import LESSON_STATUSES, Lesson
from lessonbank.ports import LessonQuery, LessonSort
from lessonbank.services.consolidation.decay import TIERS, lesson_tier
from lessonbank.services.consolidation.triggers import guard_status
from lessonbank.services.lifecycle import Lifecycle
from lessonbank.services.scope import Scope, check_count
from lessonbank.services.transfer import (
    ExportTarget,
    Mark,
    check_format,
    export_chunks,
)

EXPORT_PAGE = 1_000  # lessons read per store call by an export
TIER_PAGE = 500  # lessons read per store call by a listing filtered by decay tier


def lesson_mark(lesson: Lesson, now: float) -> Mark:
    """What makes ``lesson`` no longer live, as an export marks it: superseded first, then expired."""
    if lesson.superseded_by is not None:
        return "superseded"
    if lesson.expires_at is not None and lesson.expires_at.timestamp() <= now:
        return "expired"
    return None


class Catalog:
    """What is in one bank's namespace, for people and tools to inspect."""

    def __init__(self, scope: Scope, *, reflection_llm: LLM | None) -> None:
        self.scope = scope
        self.reflection_llm = reflection_llm

    def lessons(
        self, query: LessonQuery, *, limit: int, offset: int, sort: LessonSort, tier: str | None = None
    ) -> list[Lesson]:
        """A page of the lessons ``query`` matches, in ``sort`` order. With a ``tier`` (see
        :mod:`~lessonbank.services.consolidation.decay`), only the lessons in that tier now: the store
        is read a page at a time, so ``offset`` and ``limit`` count lessons of that tier."""
        if tier is None:
            return self.scope.store.list_lessons(query, limit=limit, offset=offset, sort=sort)
        if tier not in TIERS:
            raise InputError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}", field="tier")
        check_count(limit, "limit")
        check_count(offset, "offset")
        store, now = self.scope.store, self.scope.now()
        found: list[Lesson] = []
        skip, read, previous = offset, 0, set[str]()
        while len(found) < limit and (
            page := store.list_lessons(query, limit=TIER_PAGE, offset=read, sort=sort)
        ):
            read += len(page)
            # A lesson written meanwhile shifts the pages by one: skip the previous page's repeat.
            fresh = [lesson for lesson in page if lesson.id not in previous]
            previous = {lesson.id for lesson in page}
            for lesson in fresh:
                if lesson_tier(lesson, now) != tier:
                    continue
                if skip:
                    skip -= 1
                    continue
                found.append(lesson)
                if len(found) == limit:
                    break
        return found

    def get_lesson(self, lesson_id: str) -> Lesson:
        """A lesson of this namespace; another namespace's is NotFoundError."""
        return self.scope.store.get_lesson(lesson_id, namespace=self.scope.namespace)

    def forget(self, lesson_id: str, *, actor: str = "api") -> None:
        """Delete a lesson from this namespace (the hard delete; ``archive`` is the soft one), with an
        audit row (``delete``, before = the lesson) in the same transaction. Raises NotFoundError if
        there is none with that id."""
        entry = Lifecycle(self.scope).entry("delete", actor, "deleted (forget)", lesson_id)
        if not self.scope.store.delete_lesson(self.scope.namespace, lesson_id, audit=entry):
            raise NotFoundError("lesson", lesson_id)
        Lifecycle(self.scope).mirror(actor, f"Forget {lesson_id}")

    def show(self, record_id: str) -> dict[str, Any]:
        """Any record of this namespace by id, with what belongs to it (an episode's decision and
        reflections). Another namespace's record is NotFoundError."""
        if not isinstance(record_id, str) or not record_id.strip():
            raise InputError("give the id of a lesson, episode, job or reflection", field="id")
        store, ns = self.scope.store, self.scope.namespace
        lookups: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
            ("les_", lambda i: {"lesson": store.get_lesson(i, namespace=ns).model_dump(mode="json")}),
            ("ep_", self._show_episode),
            ("job_", lambda i: {"job": store.get_job(i, namespace=ns).model_dump(mode="json")}),
            ("ref_", lambda i: {"reflection": store.get_reflection(i, namespace=ns).model_dump(mode="json")}),
        ]
        # The id's prefix says where to look first; ids chosen by the caller have none.
        lookups.sort(key=lambda item: not record_id.startswith(item[0]))
        for _, lookup in lookups:
            try:
                return lookup(record_id)
            except NotFoundError:
                continue
        raise NotFoundError("record", record_id)

    def _show_episode(self, episode_id: str) -> dict[str, Any]:
        store, ns = self.scope.store, self.scope.namespace
        episode, decision = store.get_episode(episode_id, namespace=ns)
        reflections = store.reflections_for_episode(episode_id, namespace=ns)
        return {
            "episode": episode.model_dump(mode="json"),
            "decision": decision.model_dump(mode="json") if decision else None,
            "reflections": [r.model_dump(mode="json") for r in reflections],
        }

    def export(self, fmt: str, *, live_only: bool = False) -> str:
        """Every lesson of the namespace as json, jsonl or markdown (see :meth:`iter_export`)."""
        return "".join(self.iter_export(fmt, live_only=live_only))

    def export_to(self, target: ExportTarget, fmt: str, *, live_only: bool = False) -> int:
        """:meth:`export` written to a path or a text stream as it is read, ending with a newline;
        returns how many lessons it holds. A path is replaced only once the export is whole."""
        check_format(fmt)
        written = 0

        def counted() -> Iterator[tuple[Lesson, Mark]]:
            nonlocal written
            for item in self.marked_lessons(live_only=live_only):
                written += 1
                yield item

        exported = write_export(counted(), fmt, self.scope.namespace, target)  # every format, agent files too
        return written if exported is None else exported

    def iter_export(self, fmt: str, *, live_only: bool = False) -> Iterator[str]:
        """The export as text chunks, a record at a time: a backup (every status, superseded and
        expired lessons included and marked, see :mod:`~lessonbank.services.transfer`), or only the
        live lessons with ``live_only``."""
        check_format(fmt)
        return export_chunks(self.marked_lessons(live_only=live_only), fmt, self.scope.namespace)

    def marked_lessons(self, *, live_only: bool = False) -> Iterator[tuple[Lesson, Mark]]:
        """The namespace's lessons, newest first, a page at a time, each with its mark (None: live):
        every status, and superseded and expired lessons too unless ``live_only``.

        Pages are read by offset: a lesson written during the export shifts the pages by one, so
        the previous page's ids are kept to skip the repeat. Memory holds two pages at a time."""
        store, namespace = self.scope.store, self.scope.namespace
        query = LessonQuery(namespace, statuses=list(LESSON_STATUSES), live_only=live_only)
        offset, previous = 0, set[str]()
        while page := store.list_lessons(query, limit=EXPORT_PAGE, offset=offset):
            offset += len(page)
            fresh = [lesson for lesson in page if lesson.id not in previous]
            previous = {lesson.id for lesson in page}
            now = self.scope.clock()
            yield from ((lesson, lesson_mark(lesson, now)) for lesson in fresh)

    def stats(self) -> dict[str, Any]:
        stats = self.scope.store.stats(self.scope.namespace).as_dict()
        stats["llm"] = self.reflection_llm.model if self.reflection_llm else None
        # The consolidation guards: whether the breaker stopped automatic cycles, today's spend.
        stats["consolidation"] = guard_status(
            self.scope.store, self.scope.namespace, self.scope.settings, self.scope.now()
        )
        return stats
