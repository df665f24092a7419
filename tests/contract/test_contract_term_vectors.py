"""Term vectors on every store that keeps them: written with each lesson, rewritten only when what
they are made of changes, removed with the lesson, and ranked alike by the in-process lexical index
whichever store holds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank import LessonBank, Settings
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.retrieval.hybrid import backfill_term_vectors
from lessonbank.stores import Store
from lessonbank.stores.lexical import LEXICAL_SPACE, lesson_term_vector
from tests.contract.conftest import Clock

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)
TEXTS = [
    "Run the migrations before the tests, or the schema check fails on a fresh database.",
    "Pin the numpy version in CI: a new release changed the dtype of bitwise counts.",
    "Close the connection pool on shutdown, or the worker hangs waiting for idle connections.",
    "Retry a lost Redis connection with backoff instead of failing the whole batch import.",
    "Quote identifiers in generated SQL: a column named order breaks the migration.",
    "Run the tests against PostgreSQL too: SQLite accepts types PostgreSQL refuses.",
]
QUERIES = ["migration schema check", "connection pool worker hangs", "redis batch import", "tests postgresql"]


def _terms(store: Store, namespace: str = "default") -> dict[str, bytes]:
    return dict(store.vector_changes(namespace, LEXICAL_SPACE, 0).rows)


def test_a_term_vector_goes_with_each_lesson(store: Store, clock: Clock) -> None:
    if not store.term_vectors:
        pytest.skip("this store ranks lexical recall itself")
    written = [store.write_lesson(Lesson(content=text, tags=["ops"])).lesson for text in TEXTS[:3]]
    added, _ = store.import_lessons([Lesson(content=text, agent="bot") for text in TEXTS[3:]])
    assert added == 3
    stored = {lesson.id: lesson for lesson in store.list_lessons(LessonQuery("default"), limit=100)}
    vectors = _terms(store)
    assert set(vectors) == set(stored)
    assert all(vectors[i] == lesson_term_vector(lesson) for i, lesson in stored.items())
    assert store.vector_changes("default", LEXICAL_SPACE, 0).count == 6

    # A change to what the vector is made of rewrites it; any other change does not.
    first = written[0]
    seq = store.vector_changes("default", LEXICAL_SPACE, 0).seq
    store.update_lesson(first.model_copy(update={"importance": 0.9}))
    assert store.vector_changes("default", LEXICAL_SPACE, seq).rows == []
    changed = store.update_lesson(first.model_copy(update={"content": first.content + " Always."}))
    rows = store.vector_changes("default", LEXICAL_SPACE, seq).rows
    assert rows == [(first.id, lesson_term_vector(changed))]

    assert store.delete_lesson("default", written[1].id)
    after = store.vector_changes("default", LEXICAL_SPACE, 0)
    assert written[1].id not in dict(after.rows) and after.count == 5


def test_the_backfill_writes_only_what_is_missing(store: Store, clock: Clock) -> None:
    if not store.term_vectors:
        pytest.skip("this store ranks lexical recall itself")
    for text in TEXTS:
        store.write_lesson(Lesson(content=text))
    assert backfill_term_vectors(store, "default") == 0
    assert store.lessons_missing_vectors("default", LEXICAL_SPACE, 10) == []


def test_shared_stores_rank_as_sqlite_does(backend: str, store_url: str, tmp_path: Path) -> None:
    """Exact BM25 over the same term vectors: the same lessons, in the same order, with the same scores."""
    if backend not in ("redis", "postgres"):
        pytest.skip("compares a shared store with SQLite")
    lessons = [Lesson(id=f"lesson-{n}", content=text, tags=["ops"]) for n, text in enumerate(TEXTS)]
    results = []
    for url in (f"sqlite:///{tmp_path / 'reference.db'}", store_url):
        with LessonBank(url, settings=FAST, worker=False) as bank:
            bank.import_lessons([lesson.model_dump(mode="json") for lesson in lessons])
            results.append(
                [
                    [(hit.lesson.id, round(hit.lexical, 9)) for hit in bank.recall(q, k=4, mode="lexical")]
                    for q in QUERIES
                ]
            )
    assert results[0] == results[1]
    assert all(result for result in results[1])


def test_lessons_stored_before_term_vectors_get_theirs(backend: str, store_url: str) -> None:
    """A bank written by a version that kept no term vectors: PostgreSQL writes them in its migration,
    any other store when recall first needs them; recall finds every lesson either way."""
    if backend == "memory":
        pytest.skip("the in-memory store ranks lexical recall itself")
    with LessonBank(store_url, settings=FAST, worker=False) as bank:
        bank.import_lessons([{"content": text} for text in TEXTS])
        _drop_term_vectors(bank.store, backend)
        assert bank.store.lessons_missing_vectors("default", LEXICAL_SPACE, 10)
    with LessonBank(store_url, settings=FAST, worker=False) as bank:
        hits = bank.recall("migration schema check", k=2, mode="lexical")
        assert hits and "migrations" in hits[0].lesson.content
        assert bank.store.lessons_missing_vectors("default", LEXICAL_SPACE, 10) == []
        assert len(_terms(bank.store)) == len(TEXTS)


def _drop_term_vectors(store: Store, backend: str) -> None:
    """Make ``store`` look as a version before term vectors left it."""
    if backend == "postgres":
        with store.dialect.tx() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM lesson_vectors WHERE model = ?", (LEXICAL_SPACE,))
            conn.execute("DELETE FROM schema_migrations WHERE version = 5")
    elif backend == "redis":
        index = store.index  # type: ignore[attr-defined]
        keys = [
            index.vec_key("default", what, LEXICAL_SPACE) for what in ("vecctr", "vecseq", "vec", "vechash")
        ]
        store.db.r.delete(*keys)  # type: ignore[attr-defined]
    else:
        with store.dialect.tx() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM lesson_vectors WHERE model = ?", (LEXICAL_SPACE,))
