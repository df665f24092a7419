"""The consolidation pre-pass: near-duplicate clusters (words, marks, vectors), contradictions, decayed
lessons and rules due for promotion, without any LLM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from lessonbank.lessons import similar_to
from lessonbank.models import Lesson
from lessonbank.services.consolidation import prepass
from lessonbank.services.consolidation.prepass import find_candidates

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def lesson(content: str, lesson_id: str, **fields: Any) -> Lesson:
    fields.setdefault("created_at", NOW - DAY)
    return Lesson(id=lesson_id, content=content, **fields)


def test_the_same_lesson_retyped_is_a_cluster_and_siblings_are_not() -> None:
    lessons = [
        lesson("Always run the tests before committing.", "a"),
        lesson("always run tests before committing", "b"),
        lesson("Check whitespace after keywords.", "c"),
        lesson(
            "Check whitespace before keywords.", "d"
        ),  # token Jaccard 0.6: a sibling, the word is the lesson
        lesson("Run the full test suite before you commit.", "e"),  # the same advice in other words
    ]
    found = find_candidates(lessons, NOW)
    assert found.clusters == [["a", "b"]]
    assert found.counts == {
        "lessons": 5,
        "live": 5,
        "marks": 0,
        "words": 1,
        "paraphrases": 0,
        "vectors": 0,
        "opposed": 0,  # after / before: two lessons, neither merged nor opposed
        "offered": 1,  # e, the same advice in other words, for the LLM phase to confirm
    }


def test_a_words_mark_joins_only_the_same_lesson_and_a_vector_mark_is_trusted() -> None:
    c = lesson("Check whitespace after keywords.", "c")
    d = similar_to(lesson("Check whitespace before keywords.", "d"), "c", 0.6, "words")
    e = lesson("Run the full test suite before you commit.", "e")
    f = similar_to(lesson("Always run the tests before committing.", "f"), "e", 0.95, "vector:minilm")
    found = find_candidates([c, d, e, f], NOW)
    assert found.clusters == [["e", "f"]]
    assert found.counts["marks"] == 1


def test_a_chain_joins_only_lessons_close_to_every_member() -> None:
    # a ~ b and b ~ c are marked, a and c share no word: complete linkage keeps c out of a's cluster
    # (a chain of connected pairs used to join all four). The retyped d is a's own lesson.
    lessons = [
        lesson("Pin the dependency versions.", "a"),
        similar_to(lesson("Lock every package to an exact release.", "b"), "a", 0.93, "vector:minilm"),
        similar_to(lesson("Freeze requirements with exact versions.", "c"), "b", 0.94, "vector:minilm"),
        lesson("pin dependency versions", "d"),  # the same lesson as a
    ]
    assert find_candidates(lessons, NOW).clusters == [["a", "b", "d"]]


def vectors_for(rows: dict[str, list[float]]) -> dict[str, np.ndarray]:
    return {key: np.asarray(value, dtype=np.float32) for key, value in rows.items()}


def test_close_vectors_cluster_unless_siblings_or_opposite() -> None:
    lessons = [
        lesson("Run the full test suite before you commit.", "a"),
        lesson("Always execute every test prior to a commit.", "b"),
        lesson("Check whitespace after keywords.", "c"),
        lesson("Check whitespace before keywords.", "d"),
        lesson("Use eval on trusted input only.", "e"),
        lesson("Never use eval on input.", "f"),
        lesson("Prefer pathlib over os.path.", "g"),
    ]
    vectors = vectors_for(
        {
            "a": [1.0, 0.0, 0.0, 0.0],
            "b": [0.98, 0.2, 0.0, 0.0],  # cosine 0.98 with a
            "c": [0.0, 1.0, 0.0, 0.0],
            "d": [0.0, 0.99, 0.1, 0.0],  # cosine 0.99 with c, but siblings
            "e": [0.0, 0.0, 0.0, 1.0],
            "f": [0.0, 0.0, 0.1, 0.99],  # cosine 0.99 with e, but "never"
            "g": [0.0, 0.0, 1.0, 0.0],
        }
    )
    found = find_candidates(lessons, NOW, vectors=vectors)
    assert found.clusters == [["a", "b"]]
    assert found.counts["paraphrases"] + found.counts["vectors"] == 1
    # The scorer weighs the cosine: the same words with far vectors are not joined.
    far = {**vectors, "b": np.asarray([0.0, 0.0, 0.0, -1.0], dtype=np.float32)}
    assert find_candidates(lessons, NOW, vectors=far).clusters == []


def test_the_vector_pass_gives_the_same_pairs_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(20, 16)).astype(np.float32)
    lessons, vectors = [], {}
    for n in range(40):  # lesson 20 + k is lesson k's vector with a little noise
        lessons.append(lesson(f"advice {n}", f"l{n:02d}"))
        vectors[f"l{n:02d}"] = base[n % 20] + (0.01 * rng.normal(size=16) if n >= 20 else 0)
    whole = sorted(pair for pair, _ in prepass._vector_pairs(lessons, vectors, 0.9))
    monkeypatch.setattr(prepass, "BLOCK_CELLS", 7)  # blocks of one row
    assert sorted(pair for pair, _ in prepass._vector_pairs(lessons, vectors, 0.9)) == whole
    assert whole == [(f"l{k:02d}", f"l{k + 20:02d}") for k in range(20)]


def test_only_live_active_unpinned_lessons_of_one_scope_are_clustered() -> None:
    text = "Always run the tests before committing."
    lessons = [
        lesson(text, "ins-g1", kind="insight", goal_id="g1"),
        lesson(text.lower(), "ins-g2", kind="insight", goal_id="g2"),  # another goal
        lesson(text, "rule-a1", kind="principle", agent="a1"),
        lesson(text.lower(), "rule-a2", kind="principle", agent="a2"),  # another agent
        lesson(text, "les-1"),
        lesson(text.lower(), "pinned", pinned=True),
        lesson(text.lower(), "archived", status="archived"),
        lesson(text.lower(), "superseded", superseded_by="les-1"),
        lesson(text.lower(), "expired", expires_at=NOW - DAY),
        lesson(text.lower(), "other-ns", namespace="other"),
    ]
    found = find_candidates(lessons, NOW)
    assert found.clusters == []
    assert found.counts["live"] == 7


def test_decayed_lessons_are_proposed_for_archive_not_merged() -> None:
    old = NOW - timedelta(days=200)
    lessons = [
        lesson("Use the staging database for migrations.", "old", importance=0.3, created_at=old),
        lesson("use the staging database for migrations", "old-2", importance=0.3, created_at=old),
        lesson("Keep the pinned one.", "pinned", importance=0.1, created_at=old, pinned=True),
        lesson("Fresh advice.", "fresh", importance=0.3),
    ]
    found = find_candidates(lessons, NOW)
    assert [lesson_id for lesson_id, _ in found.archive] == ["old", "old-2"]
    assert all(score < 0.05 for _, score in found.archive)
    assert found.clusters == []


def test_contradictions_come_from_marks_between_live_lessons() -> None:
    a = lesson("Use eval on trusted input.", "a")
    b = similar_to(lesson("Never use eval.", "b"), "a", 0.93, "vector:minilm", key="contradicts")
    c = similar_to(lesson("Never call eval.", "c"), "gone", 0.93, "vector:minilm", key="contradicts")
    gone = lesson("Call eval freely.", "gone", status="archived")
    pinned = similar_to(
        lesson("Eval is fine.", "p", pinned=True), "b", 0.9, "vector:minilm", key="contradicts"
    )
    found = find_candidates([a, b, c, gone, pinned], NOW)
    assert found.contradictions == [("a", "b"), ("b", "p")]


def test_tactical_rules_confirmed_across_four_weeks_are_due_for_promotion() -> None:
    start = (NOW - timedelta(days=30)).timestamp()

    def rule(lesson_id: str, **meta: Any) -> Lesson:
        metadata = {"stream": "tactical", "first_confirmed": start, "last_confirmed": start, **meta}
        return lesson(f"Rule {lesson_id}.", lesson_id, kind="principle", agent="a", metadata=metadata)

    lessons = [
        rule("due", confirmations=3, last_confirmed=(NOW - DAY).timestamp()),
        rule("once", confirmations=1),
        rule("young", confirmations=2, first_confirmed=(NOW - 3 * DAY).timestamp()),
        rule("strategic", confirmations=5, stream="strategic"),
    ]
    assert find_candidates(lessons, NOW).promotions == ["due"]


def test_close_vectors_naming_different_things_are_not_joined() -> None:
    one = lesson("The implementation has an indentation error in `is_prime`; indent the body.", "a")
    two = lesson("An indentation error in `sum_of_digits` broke it: indent the function body.", "b")
    three = lesson("An indentation error in `is_prime`: the body must be indented one level.", "c")
    close = np.ones(4, dtype=np.float32) / 2.0
    found = find_candidates([one, two, three], NOW, vectors={"a": close, "b": close, "c": close})
    assert found.clusters == [["a", "c"]]
