"""The consolidation cycle's deterministic operations (merge, archive, flag), their validation, and
convergence: a second cycle on the bank the first one left proposes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lessonbank.lessons import similar_to
from lessonbank.models import MAX_TAGS, Lesson
from lessonbank.proposals import Operation
from lessonbank.services.consolidation.operations import deterministic_operations, merged_lesson, validate
from lessonbank.services.consolidation.prepass import find_candidates

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)
OLD = NOW - timedelta(days=200)


def lesson(content: str, lesson_id: str, **fields: Any) -> Lesson:
    fields.setdefault("created_at", NOW - DAY)
    return Lesson(id=lesson_id, content=content, **fields)


def by_id(*lessons: Lesson) -> dict[str, Lesson]:
    return {item.id: item for item in lessons}


def cycle(bank: dict[str, Lesson], rejected: set[str] | None = None) -> list[Operation]:
    found = find_candidates(list(bank.values()), NOW)
    proposed = deterministic_operations(found, bank, NOW, rejected=rejected or set())
    kept, dropped = validate(proposed, bank, now=NOW)
    assert dropped == []
    return kept


def test_a_merge_keeps_the_best_text_and_sums_the_rest() -> None:
    a = lesson("Always run the tests before committing.", "a", tags=["ci", "tests"], importance=0.4)
    b = lesson(
        "always run tests before committing",
        "b",
        tags=["tests", "git"],
        importance=0.9,
        confidence=0.7,
        access_count=5,
        helpful=3,
        harmful=1,
        last_accessed=NOW - 2 * DAY,
        metadata={"similar_to": [{"id": "a", "similarity": 0.9, "by": "words"}], "note": "kept"},
    )
    c = lesson("Always run tests before committing!", "c", access_count=2, helpful=1)
    ops = cycle(by_id(a, b, c))
    assert [op.kind for op in ops] == ["merge"]
    merge = ops[0]
    assert merge.lesson_ids == ["b", "a", "c"]  # the most used first
    assert merge.reason == "near duplicates: b, a, c; kept the text of b (most used)"
    merged = merge.lesson
    assert merged is not None
    assert merged.content == "always run tests before committing"
    assert merged.tags == ["tests", "git", "ci"]
    assert (merged.importance, merged.confidence) == (0.9, 0.7)
    assert (merged.access_count, merged.helpful, merged.harmful) == (7, 4, 1)
    assert merged.last_accessed == NOW - 2 * DAY
    assert merged.source == "consolidation"
    assert merged.metadata == {"note": "kept", "merged_from": ["b", "a", "c"]}
    assert merged.id not in ("a", "b", "c") and merged.created_at == NOW


def test_merged_tags_are_capped_and_rules_keep_their_confirmations() -> None:
    meta = {"stream": "tactical", "confirmations": 2}
    a = lesson(
        "Pin versions.",
        "a",
        kind="principle",
        agent="x",
        tags=[f"a{n}" for n in range(20)],
        metadata={**meta, "first_confirmed": 100.0, "last_confirmed": 200.0},
    )
    b = lesson(
        "pin versions",
        "b",
        kind="principle",
        agent="x",
        tags=[f"b{n}" for n in range(20)],
        metadata={**meta, "first_confirmed": 50.0, "last_confirmed": 150.0},
    )
    merged = merged_lesson([a, b], NOW)
    assert len(merged.tags) == MAX_TAGS and merged.tags[:20] == a.tags
    assert merged.metadata["first_confirmed"] == 50.0
    assert merged.metadata["last_confirmed"] == 200.0
    assert merged.metadata["confirmations"] == 4


def test_archive_and_flag_operations() -> None:
    old = lesson("Use the staging database for migrations.", "old", importance=0.3, created_at=OLD)
    a = lesson("Use eval on trusted input.", "a")
    b = similar_to(lesson("Never use eval.", "b"), "a", 0.93, "vector:minilm", key="contradicts")
    ops = cycle(by_id(old, a, b))
    assert [(op.kind, op.lesson_ids) for op in ops] == [("archive", ["old"]), ("flag", ["a", "b"])]
    archive = ops[0]
    assert archive.score is not None and archive.score < 0.05
    assert archive.reason == "decay score 0.001 < 0.05: unused for 200 days, 0 uses, importance 0.30"
    assert ops[1].reason == "marked as contradicting when written"


def test_rejected_operations_are_not_proposed_again() -> None:
    bank = by_id(
        lesson("Always run the tests before committing.", "a"),
        lesson("always run tests before committing", "b"),
        lesson("Use the staging database for migrations.", "old", importance=0.3, created_at=OLD),
    )
    first = cycle(bank)
    merge = next(op for op in first if op.kind == "merge")
    again = cycle(bank, rejected={merge.fingerprint})
    assert [op.kind for op in again] == ["archive"]  # new ids, same fingerprint: the merge stays out


def apply(bank: dict[str, Lesson], ops: list[Operation]) -> dict[str, Lesson]:
    """What approving the operations writes: merges add their lesson and supersede the sources,
    archives archive (flags write nothing)."""
    out = dict(bank)
    for op in ops:
        if op.kind == "merge" and op.lesson is not None:
            out[op.lesson.id] = op.lesson
            for source in op.lesson_ids:
                out[source] = out[source].model_copy(update={"superseded_by": op.lesson.id})
        elif op.kind == "archive":
            out[op.lesson_ids[0]] = out[op.lesson_ids[0]].model_copy(update={"status": "archived"})
    return out


def test_a_second_cycle_on_the_bank_the_first_left_proposes_nothing() -> None:
    a = lesson("Use eval on trusted input.", "a")
    bank = by_id(
        lesson("Always run the tests before committing.", "t1", access_count=1),
        lesson("always run tests before committing", "t2"),
        lesson("Always run tests before committing!", "t3"),
        lesson("Run the full test suite before you commit.", "t4"),
        similar_to(lesson("Execute every test prior to a commit.", "t5"), "t4", 0.95, "vector:minilm"),
        lesson("Check whitespace after keywords.", "w1"),
        similar_to(lesson("Check whitespace before keywords.", "w2"), "w1", 0.6, "words"),
        lesson("Use the staging database for migrations.", "old", importance=0.3, created_at=OLD),
        lesson("use the staging database for migrations", "old2", importance=0.3, created_at=OLD),
        a,
        similar_to(lesson("Never use eval.", "b"), "a", 0.93, "vector:minilm", key="contradicts"),
        lesson("always run tests before committing", "pinned", pinned=True),
    )
    first = cycle(bank)
    assert sorted((op.kind, tuple(op.lesson_ids)) for op in first) == [
        ("archive", ("old",)),
        ("archive", ("old2",)),
        ("flag", ("a", "b")),
        ("merge", ("t1", "t2", "t3")),
        ("merge", ("t4", "t5")),
    ]
    seen_flags = {op.fingerprint for op in first if op.kind == "flag"}  # shown once, decided by the person
    assert cycle(apply(bank, first), seen_flags) == []
    assert cycle(bank, {op.fingerprint for op in first}) == []  # everything rejected: nothing again


def insight(lesson_id: str, goal: str = "g", **fields: Any) -> Lesson:
    return lesson(f"Insight {lesson_id}.", lesson_id, kind="insight", goal_id=goal, **fields)


BANK = by_id(
    lesson("Pin versions.", "a"),
    lesson("pin versions", "b"),
    lesson("Pinned advice.", "p", pinned=True),
    lesson("Gone advice.", "gone", status="archived"),
    lesson("Pin versions.", "r", kind="principle", agent="x"),
    insight("i1"),
    insight("i2"),
    insight("i3"),
)


def new(kind: str = "lesson", content: str = "New advice.", **fields: Any) -> Lesson:
    return Lesson(content=content, kind=kind, **fields)  # type: ignore[arg-type]


CASES: list[tuple[str, Operation, str | None]] = [
    ("merge kept", Operation(kind="merge", lesson_ids=["a", "b"], lesson=new(content="Pin versions.")), None),
    ("archive kept", Operation(kind="archive", lesson_ids=["a"], score=0.01), None),
    ("connect kept", Operation(kind="connect", lesson_ids=["a", "p"], link="related"), None),
    ("flag on pinned kept", Operation(kind="flag", lesson_ids=["a", "p"]), None),
    ("evolve kept", Operation(kind="evolve", text="Tests first."), None),
    ("pattern kept", Operation(kind="pattern", lesson=new("procedure", "1. Run. 2. Check.")), None),
    ("unknown id", Operation(kind="archive", lesson_ids=["nope"]), "unknown lesson: nope"),
    ("unknown in flag", Operation(kind="flag", lesson_ids=["a", "nope"]), "unknown lesson: nope"),
    ("archive pinned", Operation(kind="archive", lesson_ids=["p"]), "pinned: p is the person's word"),
    (
        "merge pinned",
        Operation(kind="merge", lesson_ids=["a", "p"], lesson=new()),
        "pinned: p is the person's word",
    ),
    (
        "archive archived",
        Operation(kind="archive", lesson_ids=["gone"]),
        "not live: gone (archived, superseded or expired)",
    ),
    (
        "merge across kinds",
        Operation(kind="merge", lesson_ids=["a", "r"], lesson=new()),
        "scope: the merge joins lessons of different kinds or scopes",
    ),
    (
        "merged lesson of another kind",
        Operation(kind="merge", lesson_ids=["a", "b"], lesson=new("principle")),
        "scope: the merge joins lessons of different kinds or scopes",
    ),
    (
        "merge of one",
        Operation(kind="merge", lesson_ids=["a"], lesson=new()),
        "shape: a merge names two or more distinct sources and carries the merged lesson",
    ),
    ("extract without lesson", Operation(kind="extract"), "shape: extract carries the new lesson"),
    (
        "empty content",
        Operation(kind="extract", lesson=Lesson.model_construct(content="  ", kind="lesson")),
        "new lesson: its content is empty",
    ),
    (
        "pattern not a procedure",
        Operation(kind="pattern", lesson=new()),
        "new lesson: a pattern is a procedure, not a lesson",
    ),
    (
        "archive of two",
        Operation(kind="archive", lesson_ids=["a", "b"]),
        "shape: an archive names one lesson",
    ),
    (
        "connect without link",
        Operation(kind="connect", lesson_ids=["a", "b"]),
        "shape: a connection names two lessons and the link",
    ),
    ("evolve without text", Operation(kind="evolve", text=" "), "shape: an evolution carries its text"),
    (
        "insight pool full",
        Operation(kind="extract", lesson=new("insight", goal_id="g")),
        "cap: the pool of insight for goal g is full (3)",
    ),
    ("insight for another goal", Operation(kind="extract", lesson=new("insight", goal_id="h")), None),
]


@pytest.mark.parametrize(("operation", "note"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_validation(operation: Operation, note: str | None) -> None:
    kept, dropped = validate([operation], BANK, now=NOW)
    if note is None:
        assert (kept, dropped) == ([operation], [])
    else:
        assert kept == []
        assert [(op.id, op.status, op.note) for op in dropped] == [(operation.id, "dropped", note)]


def test_a_lesson_changed_twice_stays_with_the_first_operation() -> None:
    merge = Operation(kind="merge", lesson_ids=["a", "b"], lesson=new(content="Pin versions."))
    archive = Operation(kind="archive", lesson_ids=["b"], score=0.01)
    flag = Operation(kind="flag", lesson_ids=["a", "b"])  # writes nothing: no conflict
    kept, dropped = validate([merge, archive, flag], BANK, now=NOW)
    assert kept == [merge, flag]
    assert [op.note for op in dropped] == ["conflict: b is already changed by an earlier operation"]


def test_caps_hold_after_the_operations_in_order() -> None:
    extract = Operation(kind="extract", lesson=new("insight", goal_id="g"))
    archive = Operation(kind="archive", lesson_ids=["i1"], score=0.01)
    kept, dropped = validate([archive, extract, extract.model_copy(update={"id": "op_2"})], BANK, now=NOW)
    assert [op.kind for op in kept] == ["archive", "extract"]  # the archive made room for one
    assert [op.id for op in dropped] == ["op_2"]
    merge = Operation(kind="merge", lesson_ids=["i1", "i2"], lesson=insight("m"))
    assert validate([merge], BANK, now=NOW) == ([merge], [])  # a merge never grows its pool


def test_a_new_lesson_saying_what_another_says_is_dropped() -> None:
    from lessonbank.lessons import LessonWriter

    now = datetime(2026, 6, 1, tzinfo=UTC)
    stored = LessonWriter.prepared(Lesson(id="les_old", content="Pin the CI image digest.", created_at=now))
    first = Operation(kind="extract", lesson=Lesson(content="Cache the wheels between CI runs."))
    twice = Operation(kind="extract", lesson=Lesson(content="cache the  wheels between CI runs."))
    again = Operation(kind="extract", lesson=Lesson(content="Pin the CI image digest."))
    kept, dropped = validate([first, twice, again], {"les_old": stored}, now=now)
    assert kept == [first]
    assert [op.note for op in dropped] == [
        f"duplicate: {first.lesson.id} already says this",  # type: ignore[union-attr]
        "duplicate: les_old already says this",
    ]
