"""PostgreSQL's import follows each namespace's lesson count and total length through its chunks instead
of scanning the namespace for its mean length before each one: every lesson's BM25 factors still take
``avg(doc_len)`` as the database held it before its chunk, to the last bit; after a chunk that
reinforced stored lessons (their lengths change with their tags), and in a new process, it is read again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from lessonbank.models import Lesson
from lessonbank.stores import Store, open_store
from lessonbank.stores.lexical import FIELD_WEIGHTS, bm25_factors, weighted_terms
from tests.contract.conftest import POSTGRES_URL, Clock, drop_postgres_schema, require

AT = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def url() -> Iterator[str]:
    require("postgres")
    schema = f"lbtest_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{POSTGRES_URL}?schema={schema}"
    finally:
        drop_postgres_schema(schema)


def _lesson(n: int, words: int, tags: list[str], namespace: str = "default") -> Lesson:
    text = " ".join(f"w{n}x{i}" for i in range(words))
    return Lesson(
        id=f"les-{namespace}-{n}", namespace=namespace, content=text, tags=tags, created_at=AT, updated_at=AT
    )


def _mean(store: Store, namespace: str) -> float:
    with store.dialect.read() as conn:  # type: ignore[attr-defined]
        row = conn.execute(
            "SELECT coalesce(avg(doc_len), 0) FROM lessons WHERE namespace = ?", (namespace,)
        ).fetchone()
    return float(row[0])


def _weights(store: Store) -> dict[str, dict[str, float]]:
    with store.dialect.read() as conn:  # type: ignore[attr-defined]
        return dict(conn.execute("SELECT id, weights FROM lessons").fetchall())


def test_each_chunk_takes_the_mean_length_the_database_held_before_it(url: str) -> None:
    store = open_store(url, clock=Clock())
    try:
        batches = [
            [_lesson(1, 9, ["a"]), _lesson(2, 10, ["b"]), _lesson(3, 10, ["c"]), _lesson(9, 3, [], "other")],
            # A repeat of lesson 1 with two new tags: lesson 1 grows by two words, in this chunk.
            [_lesson(4, 7, ["d"]), _lesson(1, 9, ["e", "f"]), _lesson(10, 4, [], "other")],
            [_lesson(5, 12, ["g"]), _lesson(6, 5, [])],
            [_lesson(7, 8, ["h"])],
        ]
        means: dict[str, float] = {}
        for batch in batches:
            for lesson in batch:
                means.setdefault(lesson.id, _mean(store, lesson.namespace))
            store.import_lessons(batch)
        stored = _weights(store)
    finally:
        store.close()
    assert len(stored) == 9
    fractional = [m for m in means.values() if m != int(m)]
    assert fractional, "the test wants means that are no whole numbers"
    for batch in batches:
        for lesson in batch:
            if lesson.id == "les-default-1":
                continue  # rewritten when its repeat reinforced it (with the mean a search last saw)
            frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
            assert stored[lesson.id] == bm25_factors(frequencies, length, means[lesson.id]), lesson.id
