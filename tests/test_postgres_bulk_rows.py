"""PostgreSQL's import rows made apart from the transaction (postgres_import.import_rows, run by an
import's worker process) are the rows and vectors the transaction would make itself, whatever the
namespace's mean length turns out to be; and they survive the trip between processes."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson
from lessonbank.stores.sql.postgres_import import import_rows
from lessonbank.stores.sql.postgres_search import copy_row_and_terms

_TEXT = st.lists(
    st.sampled_from(["a", "b", "z", "1", '"', "'", "\\", ",", " ", "é", "{", "run", "tests"]),
    min_size=1,
    max_size=12,
).map("".join)
_WHEN = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC))


@st.composite
def lessons(draw: st.DrawFn) -> Lesson:
    content = draw(_TEXT.filter(str.strip))
    lesson = Lesson(
        content=content,
        tags=draw(st.lists(st.text(alphabet="abc\"'\\, é", min_size=1, max_size=6), max_size=4)),
        learned_from=draw(st.none() | _TEXT),
        importance=draw(st.floats(min_value=0, max_value=1)),
        access_count=draw(st.integers(min_value=0, max_value=9)),
        pinned=draw(st.booleans()),
        expires_at=draw(st.none() | _WHEN),
        last_accessed=draw(st.none() | _WHEN),
        metadata=draw(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2)),
    )
    return LessonWriter.prepared(lesson)


@settings(max_examples=200, deadline=None)
@given(st.lists(lessons(), min_size=1, max_size=4), st.floats(min_value=0, max_value=500))
def test_rows_made_apart_are_the_rows_copy_writes(batch: list[Lesson], mean: float) -> None:
    rows = pickle.loads(pickle.dumps(import_rows(batch), pickle.HIGHEST_PROTOCOL))
    for lesson, row in zip(batch, rows, strict=True):
        assert row.written(mean) == copy_row_and_terms(lesson, mean)
        assert (row.id, row.namespace, row.content_hash, row.tags) == (
            lesson.id,
            lesson.namespace,
            lesson.content_hash,
            lesson.tags,
        )
        assert row.lesson() == lesson
