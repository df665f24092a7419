"""The one gate of every lesson written (reflected, added by hand, imported): secrets redacted, a lesson
that reads as instructions to the model quarantined (:func:`guarded`), and one written for an untrusted
agent quarantined too (:func:`untrusted`). Pure: no store, no clock; an import's worker processes run it.
:mod:`lessonbank.services.writing` says what each write path does with it."""

from __future__ import annotations

import logging
from typing import Any

from lessonbank.injection import lesson_injection_reason
from lessonbank.models import Lesson
from lessonbank.plain_lessons import plain_lesson
from lessonbank.redact import redact_lesson

log = logging.getLogger("lessonbank")


def guarded(record: Lesson | dict[str, Any]) -> Lesson:
    """The one gate of every lesson written: secrets redacted (a dict before it becomes a lesson,
    see :func:`~lessonbank.redact.redact_lesson`), and ``status="quarantined"`` with the reason in
    ``metadata["quarantine_reason"]`` when its text reads as instructions to the model."""
    if isinstance(record, Lesson):
        lesson = redact_lesson(record)
    else:
        data = redact_lesson(record)
        lesson = plain_lesson(data) or Lesson.model_validate(data)
    reason = lesson_injection_reason(lesson)
    if reason is None:
        return lesson
    log.warning("lesson %s quarantined (%s): it reads as instructions to the model", lesson.id, reason)
    metadata = {**lesson.metadata, "quarantine_reason": reason}
    return lesson.model_copy(update={"status": "quarantined", "metadata": metadata})


def untrusted(lesson: Lesson, agents: frozenset[str], *, agent: str | None = None) -> Lesson:
    """``lesson`` quarantined when it was written for an untrusted agent (its own ``agent``, or the
    ``agent`` of the episode it came from): ``metadata["quarantine"] = "untrusted agent <name>"``.
    What it would supersede is only noted (``metadata["would_supersede"]``): an unreviewed lesson
    must not hide a live one."""
    name = next((a for a in (lesson.agent, agent) if a and a in agents), None)
    if name is None or lesson.status == "quarantined":  # screened out already: a person decides that one
        return lesson
    metadata = {**lesson.metadata, "quarantine": f"untrusted agent {name}"}
    if lesson.supersedes:
        metadata["would_supersede"] = lesson.supersedes
    log.info("lesson %s quarantined: written for untrusted agent %s", lesson.id, name)
    return lesson.model_copy(update={"status": "quarantined", "metadata": metadata, "supersedes": None})
