"""Reading the bank as a whole: list, get, show any record by id, forget, export, stats."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from lessonbank.errors import InputError, NotFoundError
from lessonbank.llm import LLM
from lessonbank.models import LESSON_STATUSES, Lesson
from lessonbank.ports import LessonQuery, LessonSort
from lessonbank.services.scope import Scope
from lessonbank.services.sections import render_lesson

ExportFormat = Literal["json", "jsonl", "markdown"]


class Catalog:
    """What is in one bank's namespace, for people and tools to inspect."""

    def __init__(self, scope: Scope, *, reflection_llm: LLM | None) -> None:
        self.scope = scope
        self.reflection_llm = reflection_llm

    def lessons(self, query: LessonQuery, *, limit: int, offset: int, sort: LessonSort) -> list[Lesson]:
        return self.scope.store.list_lessons(query, limit=limit, offset=offset, sort=sort)

    def get_lesson(self, lesson_id: str) -> Lesson:
        """A lesson of this namespace; another namespace's is NotFoundError."""
        return self.scope.store.get_lesson(lesson_id, namespace=self.scope.namespace)

    def forget(self, lesson_id: str) -> None:
        """Delete a lesson from this namespace. Raises NotFoundError if there is none with that id."""
        if not self.scope.store.delete_lesson(self.scope.namespace, lesson_id):
            raise NotFoundError("lesson", lesson_id)

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

    def export(self, fmt: str) -> str:
        """Every lesson of the namespace, whatever its status, as json, jsonl or markdown."""
        lessons = self.all_lessons()
        if fmt == "json":
            return json.dumps(
                [lesson.model_dump(mode="json") for lesson in lessons], indent=2, ensure_ascii=False
            )
        if fmt == "jsonl":
            return "".join(lesson.model_dump_json() + "\n" for lesson in lessons)
        if fmt == "markdown":
            parts = [f"# Lessons — namespace `{self.scope.namespace}`", ""]
            for lesson in lessons:
                parts += [
                    f"## {lesson.id} · {lesson.kind} · confidence {lesson.confidence:.2f}",
                    "",
                    render_lesson(lesson),
                    "",
                    f"tags: {', '.join(lesson.tags)}",
                    "",
                ]
            return "\n".join(parts)
        raise InputError(f"unknown export format {fmt!r}; use json, jsonl or markdown", field="format")

    def all_lessons(self) -> list[Lesson]:
        query = LessonQuery(self.scope.namespace, statuses=list(LESSON_STATUSES))
        out: list[Lesson] = []
        while batch := self.scope.store.list_lessons(query, limit=1000, offset=len(out)):
            out.extend(batch)
        return out

    def stats(self) -> dict[str, Any]:
        stats = self.scope.store.stats(self.scope.namespace).as_dict()
        stats["llm"] = self.reflection_llm.model if self.reflection_llm else None
        return stats
