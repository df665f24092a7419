"""A lesson built from a plain dict without pydantic's pass (``plain_lessons``) is the one the model
validates: same values, same fields given; a dict it does not take (or the model refuses) is left to
the model, so an import still skips it with the model's own message."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lessonbank import LessonBank
from lessonbank.models import Lesson
from lessonbank.plain_lessons import plain_lesson

AT = datetime(2026, 5, 1, tzinfo=UTC)
FIXED = {"id": "les-1", "created_at": AT, "updated_at": AT}


def _same(data: dict[str, Any]) -> None:
    """``plain_lesson(data)`` is None, or the lesson the model makes (the model must accept it then)."""
    built = plain_lesson(dict(data))
    if built is None:
        return
    validated = Lesson.model_validate(dict(data))
    assert built.model_dump() == validated.model_dump()
    assert built.model_fields_set == validated.model_fields_set
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.model_dump_json() == validated.model_dump_json()


TAKEN = [
    {"content": "  Run the migrations first.  ", "tags": ["DB", " db ", "Ops  Team", ""], "task_type": "ci"},
    {
        "content": "naïve café: é",
        "learned_from": "  " + "t" * 1_500 + "  ",
        "namespace": "ns",
        "source": "import",
    },
    {"content": "x", "learned_from": "   ", "agent": None, "goal_id": "g1", "kind": "insight"},
    {"content": "y", "importance": 1.0, "confidence": 0.0, "pinned": True, "access_count": 3, **FIXED},
    {
        "content": "z",
        "status": "quarantined",
        "trigger": "manual",
        "supersedes": "les-0",
        "content_hash": "h",
    },
]
REFUSED = [
    {"content": "   "},
    {"content": "a\x00b"},
    {"content": "bad \udc80 byte"},
    {"content": "x" * 10_001},
    {"content": "x", "kind": "rule"},
    {"content": "x", "importance": 1.5},
    {"content": "x", "importance": float("nan")},
    {"content": "x", "importance": 1},
    {"content": "x", "pinned": 1},
    {"content": "x", "access_count": -1},
    {"content": "x", "access_count": True},
    {"content": "x", "tags": "one,two"},
    {"content": "x", "tags": ("a",)},
    {"content": "x", "tags": ["a", 2]},
    {"content": "x", "tags": ["t" * 65]},
    {"content": "x", "tags": [f"t{n}" for n in range(33)]},
    {"content": "x", "id": ""},
    {"content": "x", "id": "i" * 201},
    {"content": "x", "namespace": None},
    {"content": "x", "metadata": {"k": "v"}},
    {"content": "x", "created_at": "2026-05-01T00:00:00Z"},
    {"content": "x", "unknown": "field"},
    {"tags": ["no content"]},
    {"content": 5},
]


@pytest.mark.parametrize("data", TAKEN)
def test_a_dict_of_a_known_shape_is_built_as_the_model_validates_it(data: dict[str, Any]) -> None:
    assert plain_lesson(dict(data)) is not None
    _same({**FIXED, **data})


@pytest.mark.parametrize("data", REFUSED)
def test_anything_else_is_left_to_the_model(data: dict[str, Any]) -> None:
    assert plain_lesson(dict(data)) is None


def test_defaults_are_made_per_lesson() -> None:
    one, two = plain_lesson({"content": "a"}), plain_lesson({"content": "a"})
    assert one is not None and two is not None
    assert one.id != two.id and one.id.startswith("les_")
    assert one.tags is not two.tags and one.metadata is not two.metadata
    assert one.model_fields_set == {"content"}


_TEXT = st.text(st.characters(codec="utf-8"), max_size=30) | st.text(max_size=5)
_VALUES = st.one_of(
    st.none(),
    _TEXT,
    st.lists(_TEXT, max_size=4),
    st.floats(allow_nan=True),
    st.integers(-2, 3),
    st.booleans(),
    st.just(AT),
)
_FIELDS = st.sampled_from(
    [*Lesson.model_fields, "unknown"],
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_FIELDS, _VALUES, max_size=6), _TEXT)
def test_any_dict_is_built_as_the_model_builds_it_or_left_to_it(data: dict[str, Any], content: str) -> None:
    data.setdefault("content", content)
    for key in ("id", "created_at", "updated_at"):
        data.setdefault(key, FIXED[key])
    built = plain_lesson(dict(data))
    try:
        validated = Lesson.model_validate(dict(data))
    except ValidationError:
        assert built is None
        return
    if built is not None:
        assert built.model_dump() == validated.model_dump()
        assert built.model_fields_set == validated.model_fields_set


def test_an_import_skips_what_the_model_refuses_with_the_models_message(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    records = [{"content": "keep me"}, {"content": "x", "importance": 1.5}, {"content": "   "}]
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False) as bank, caplog.at_level(logging.WARNING):
        counts = bank.import_lessons(records)
    assert counts == {"added": 1, "reinforced": 0, "skipped": 2}
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 2
    assert skipped[0].startswith("import: record 2 skipped: 1 validation error for Lesson importance")
    assert "content is empty" in skipped[1]
