"""Insights are per goal (seed 000): the write rules never fold one goal's insight into another's."""

from __future__ import annotations

from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson
from lessonbank.text import content_hash

WRITER = LessonWriter(lambda: 1_700_000_000.0)
TEXT = "Filter web_search results by date."


def insight(goal_id: str | None, content: str = TEXT) -> Lesson:
    return LessonWriter.prepared(Lesson(content=content, kind="insight", goal_id=goal_id))


def test_an_insights_hash_is_scoped_by_its_goal() -> None:
    assert insight("g-1").content_hash != insight("g-2").content_hash
    assert insight("g-1").content_hash == insight("g-1").content_hash
    # Other kinds, and insights without a goal, keep the hash they always had.
    assert insight(None).content_hash == content_hash("default", "insight", TEXT)
    lesson = LessonWriter.prepared(Lesson(content=TEXT, goal_id="g-1"))
    assert lesson.content_hash == content_hash("default", "lesson", TEXT)


def test_no_lookup_reinforces_an_insight_of_another_goal() -> None:
    other, own = insight("g-1"), insight("g-2", TEXT + " !")  # the same insight, retyped
    new = insight("g-2")
    asked: list[str] = []

    def read(lookup: tuple[str, str]) -> Lesson:
        asked.append(lookup[0])
        return other  # whatever is looked up (hash, named, similar), another goal's insight is found

    decision = WRITER.decide(new, similar=other, duplicate_of=other.id, read=read)
    assert decision.action == "added" and asked == ["hash", "named", "similar"]
    decision = WRITER.decide(
        new, similar=own, duplicate_of=None, read=lambda lookup: own if lookup[0] == "similar" else None
    )
    assert decision.action == "reinforced" and decision.lesson.id == own.id
