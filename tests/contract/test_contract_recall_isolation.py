"""Store contract: lexical ranking in one namespace never depends on another namespace's data.

Document frequencies, the lesson count and the mean lesson length that BM25 reads, and the
"newest postings" fallback taken when every query word is common, are all the namespace's own.
"""

from __future__ import annotations

from lessonbank.ports import LessonQuery
from lessonbank.stores import Store
from lessonbank.stores.lexical import POSTINGS_BUDGET
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import lesson

A, B = "team-a", "team-b"
WORDS = ["rollback", "migration", "postgres", "deploy"]


def ranked(store: Store, namespace: str, terms: list[str]) -> list[tuple[str, float]]:
    return [(c.lesson_id, round(c.relevance, 9)) for c in store.search(LessonQuery(namespace), terms, 10)]


def flood(store: Store, clock: Clock, namespace: str, count: int) -> None:
    """``count`` lessons in ``namespace`` that hold every word of WORDS, some more than once."""
    batch = [
        lesson(f"{' '.join(WORDS)} note {i} on deploy {i % 7} and rollback", clock, namespace=namespace)
        for i in range(count)
    ]
    for start in range(0, count, 500):
        store.import_lessons(batch[start : start + 500])


def test_another_namespace_full_of_the_same_words_leaves_a_lone_lesson_recallable(
    store: Store, clock: Clock
) -> None:
    only = store.write_lesson(
        lesson("Take a rollback snapshot before a postgres migration", clock, namespace=A)
    ).lesson
    before = ranked(store, A, WORDS)
    assert [lesson_id for lesson_id, _ in before] == [only.id]

    flood(store, clock, B, POSTINGS_BUDGET + 200)

    assert ranked(store, A, WORDS) == before
    assert ranked(store, A, ["rollback"]) == ranked(store, A, ["rollback"])  # stable
    assert [lesson_id for lesson_id, _ in ranked(store, A, ["rollback"])] == [only.id]
    # B, where every word is too common to rank by, still gets its own newest lessons.
    newest = ranked(store, B, WORDS)
    assert len(newest) == 10
    assert {lesson_id for lesson_id, _ in newest}.isdisjoint({only.id})


def test_ranking_in_a_namespace_is_the_same_whatever_the_others_hold(store: Store, clock: Clock) -> None:
    texts = [
        "Take a rollback snapshot before a postgres migration",
        "Run the migration twice on a copy of postgres before the deploy",
        "A deploy without a rollback plan waits for review",
        "Read the postgres release notes for migration changes",
        "Keep deploy scripts idempotent so a rerun is safe",
    ]
    for text in texts:
        store.write_lesson(lesson(text, clock, namespace=A))
    queries = [WORDS, ["rollback", "snapshot"], ["migration", "copy"], ["deploy"]]
    before = {tuple(q): ranked(store, A, q) for q in queries}
    assert all(before.values())

    flood(store, clock, B, 300)
    store.write_lesson(lesson("postgres postgres postgres rollback", clock, namespace=B))

    assert {tuple(q): ranked(store, A, q) for q in queries} == before
