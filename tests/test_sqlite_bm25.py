"""SQLite recall ranks each namespace by its own BM25 statistics: alone in its file, exactly as FTS5's
``bm25()`` with the field weights; beside another namespace, the same scores computed from the postings."""

from __future__ import annotations

import random
from pathlib import Path

from lessonbank.ports import LessonQuery
from lessonbank.stores.lexical import FIELD_WEIGHTS
from lessonbank.stores.sql.dialect import lesson_filter
from lessonbank.stores.sql.sqlite_search import fts_query
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import lesson

WORDS = [
    "deploy",
    "rollback",
    "migration",
    "postgres",
    "cache",
    "token",
    "retry",
    "timeout",
    "docker",
    "build",
    "test",
    "flaky",
    "lint",
    "format",
    "config",
    "secret",
    "vault",
    "queue",
    "worker",
    "lease",
    "backoff",
    "index",
    "vacuum",
    "schema",
    "column",
]
RANK = "bm25(" + ", ".join(repr(FIELD_WEIGHTS[f]) for f in ("content", "tags", "learned_from")) + ")"


def fts5_ranking(store: SQLiteStore, terms: list[str]) -> list[tuple[str, float]]:
    conn = store.dialect.connection()
    where, params = lesson_filter(store.dialect, LessonQuery("default"), store.dialect.clock())
    rows = conn.execute(
        "SELECT l.id, -m.rank FROM (SELECT rowid, rank FROM lessons_fts WHERE lessons_fts MATCH ? "
        f"AND rank MATCH ?) m JOIN lessons l ON l.rowid = m.rowid WHERE {where} ORDER BY m.rank LIMIT 10",
        (fts_query(terms), RANK, *params),
    ).fetchall()
    return [(row[0], round(row[1], 9)) for row in rows]


def test_one_namespace_ranks_as_fts5_bm25(tmp_path: Path) -> None:
    rng = random.Random(4)
    clock = Clock()
    store = SQLiteStore(tmp_path / "b.db", clock=clock)
    try:
        for n in range(300):
            text = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
            store.write_lesson(
                lesson(
                    f"{text} {n}",
                    clock,
                    tags=rng.sample(WORDS, 2),
                    learned_from=" ".join(rng.sample(WORDS, 3)),
                )
            )
        for _ in range(40):
            terms = rng.sample(WORDS, rng.randint(1, 4))
            ours = [
                (c.lesson_id, round(c.relevance, 9)) for c in store.search(LessonQuery("default"), terms, 10)
            ]
            assert ours == fts5_ranking(store, terms), terms
    finally:
        store.close()
