"""A lesson made from a plain dict of a known shape, without pydantic's validation pass.

An import hands in thousands of dicts that hold a few text fields (content, tags, task type, where
it was learned); validating each through the model costs more than redacting and screening it.
:func:`plain_lesson` checks such a dict itself and builds the :class:`~lessonbank.models.Lesson`
directly. Invariants:

- It gives the same lesson ``Lesson.model_validate`` gives (the same field values, defaults made the
  same way, the same set of fields given), or ``None``: never a lesson the model would refuse.
- ``None`` whenever the dict holds anything outside the shapes below, or anything the model would
  clean up or refuse (a NUL character, text that is not UTF-8, an empty content, a number out of
  range, a tag list ``clean_tags`` refuses): the caller validates it through the model, which gives
  its usual error. So every error message stays the model's.

Shapes taken: strings (exactly ``str``) for text fields, ids and the literal fields; a list of
strings for tags; floats in [0, 1] for importance and confidence; non-negative ints for the
counters; a bool for ``pinned``; ``datetime`` for the creation and update times; None where the
field allows it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, get_args

from lessonbank.models import (
    ID_MAX_CHARS,
    LEARNED_FROM_MAX_CHARS,
    LESSON_MAX_CHARS,
    Lesson,
    LessonKind,
    LessonSource,
    LessonStatus,
    clean_tags,
)

_set = object.__setattr__
_OPTIONAL_TEXT = frozenset(
    {
        "situation",
        "mistake",
        "correction",
        "trigger",
        "task_type",
        "agent",
        "goal_id",
        "episode_id",
        "reflection_id",
        "supersedes",
        "superseded_by",
    }
)
_CHOICES: dict[str, frozenset[str]] = {
    "kind": frozenset(get_args(LessonKind)),
    "source": frozenset(get_args(LessonSource)),
    "status": frozenset(get_args(LessonStatus)),
}
_UNIT = frozenset({"importance", "confidence"})
_COUNTS = frozenset({"access_count", "helpful", "harmful"})
_TIMES = frozenset({"created_at", "updated_at"})

# Each field's default: a value (immutable) or a factory called per lesson, in the model's order.
_DEFAULTS: list[tuple[str, Any, Callable[[], Any] | None]] = [
    (name, field.default, field.default_factory)  # type: ignore[misc]
    for name, field in Lesson.model_fields.items()
]


def _text_ok(value: str) -> bool:
    """Whether the model keeps ``value`` as it is: no NUL to drop, encodable as UTF-8."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked(name: str, value: Any) -> tuple[bool, Any]:
    """``(True, the value the model stores)`` for a field of a shape this module takes, else ``(False, None)``."""
    kind = type(value)
    if kind is str:
        if not _text_ok(value):
            return False, None
        if name == "content":
            value = value.strip()
            return 0 < len(value) <= LESSON_MAX_CHARS, value
        if name in _OPTIONAL_TEXT or name in ("namespace", "content_hash"):
            return True, value
        if name == "learned_from":
            return True, value.strip()[:LEARNED_FROM_MAX_CHARS].rstrip() or None
        if name == "id":
            return 0 < len(value) <= ID_MAX_CHARS, value
        choices = _CHOICES.get(name)
        return choices is not None and value in choices, value
    if value is None:
        return name in _OPTIONAL_TEXT or name == "learned_from", None
    if kind is list:
        if name != "tags" or not all(type(tag) is str and _text_ok(tag) for tag in value):
            return False, None
        try:
            return True, clean_tags(value)
        except ValueError:
            return False, None
    if kind is float:
        return name in _UNIT and 0.0 <= value <= 1.0, value
    if kind is int:
        return name in _COUNTS and value >= 0, value
    if kind is bool:
        return name == "pinned", value
    if kind is datetime:
        return name in _TIMES, value
    return False, None


def plain_lesson(data: dict[str, Any]) -> Lesson | None:
    """The lesson ``Lesson.model_validate(data)`` gives, built without the validation pass, or None
    when ``data`` is not of a shape taken here (see the module docstring): validate it then."""
    given: dict[str, Any] = {}
    for name, value in data.items():
        ok, kept = _checked(name, value) if type(name) is str else (False, None)
        if not ok:
            return None
        given[name] = kept
    if "content" not in given:
        return None
    values: dict[str, Any] = {}
    for name, default, factory in _DEFAULTS:
        if name in given:
            values[name] = given[name]
        else:
            values[name] = factory() if factory is not None else default
    lesson = Lesson.__new__(Lesson)
    _set(lesson, "__dict__", values)
    _set(lesson, "__pydantic_fields_set__", set(given))
    _set(lesson, "__pydantic_extra__", None)
    _set(lesson, "__pydantic_private__", None)
    return lesson
