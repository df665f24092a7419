"""The write rules decided once (LessonWriter) and the Python and SQL forms of the sorts agreeing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from lessonbank import lessons
from lessonbank.lessons import LessonWriter, Lookup
from lessonbank.models import Lesson
from lessonbank.stores.sql.dialect import SORTS as SQL_SORTS

NOW = 1_700_000_000.0


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def stored(content: str, **fields: object) -> Lesson:
    fields.setdefault("created_at", at(NOW - 100))
    fields.setdefault("updated_at", at(NOW - 100))
    return LessonWriter.prepared(Lesson(content=content, **fields))  # type: ignore[arg-type]


def reader(found: dict[Lookup, Lesson]) -> tuple[list[Lookup], Callable[[Lookup], Lesson | None]]:
    asked: list[Lookup] = []

    def read(lookup: Lookup) -> Lesson | None:
        asked.append(lookup)
        return found.get(lookup)

    return asked, read


WRITER = LessonWriter(lambda: NOW)


def test_same_content_wins_and_nothing_else_is_read() -> None:
    twin = stored("Pin the compiler")
    new = stored("pin the  compiler", tags=["ci"])
    asked, read = reader({("hash", new.content_hash): twin})
    decision = WRITER.decide(new, similar=stored("pin a compiler"), duplicate_of="les_x", read=read)
    assert decision.action == "reinforced" and decision.lesson.id == twin.id
    assert decision.lesson.access_count == twin.access_count + 1 and decision.lesson.tags == ["ci"]
    assert asked == [("hash", new.content_hash)]


def test_a_named_duplicate_counts_only_while_live() -> None:
    named = stored("retry the upload", superseded_by="les_newer")
    similar = stored("Retry the uploads.")
    new = stored("retry uploads")
    asked, read = reader({("named", named.id): named, ("similar", similar.id): similar})
    decision = WRITER.decide(new, similar=similar, duplicate_of=named.id, read=read)
    assert decision.lesson.id == similar.id  # the superseded one is skipped, the near duplicate taken
    assert [kind for kind, _ in asked] == ["hash", "named", "similar"]


def test_the_lesson_superseded_is_never_the_one_reinforced() -> None:
    old = stored("do run the migration by hand")
    new = stored("never run the migration by hand", supersedes=old.id)
    asked, read = reader({("similar", old.id): old, ("named", old.id): old})
    decision = WRITER.decide(new, similar=old, duplicate_of=old.id, read=read)
    assert decision.action == "added" and decision.supersedes == old.id
    assert asked == [("hash", new.content_hash)]
    marked = WRITER.superseded(old, new.id)
    assert marked is not None and marked.superseded_by == new.id
    assert WRITER.superseded(marked, "les_other") is None  # already superseded: nothing to mark


def test_reinforcing_caps_confidence_and_tags() -> None:
    full = stored("x", confidence=0.99, tags=[f"t{n}" for n in range(32)])
    again = WRITER.reinforced(full, ["extra"])
    assert again.confidence == 1.0 and len(again.tags) == 32 and "extra" not in again.tags


def test_another_namespace_is_never_reinforced() -> None:
    other = stored("same words", namespace="team-b")
    new = stored("same words", namespace="team-a")
    _, read = reader({("hash", new.content_hash): other})
    assert WRITER.decide(new, similar=None, duplicate_of=None, read=read).action == "added"


def test_python_and_sql_sorts_are_the_same_set() -> None:
    assert set(lessons.SORTS) == set(SQL_SORTS)
