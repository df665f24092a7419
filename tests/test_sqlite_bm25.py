"""SQLite's own lexical search ranks each namespace by its own BM25 statistics, computed in SQL from
FTS5's postings, exactly as the reference BM25 (tests/test_lexical_index.py)."""

from __future__ import annotations

import random
from pathlib import Path

from lessonbank.ports import LessonQuery
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


def test_the_store_search_ranks_every_word_exactly(tmp_path: Path) -> None:
    """What recall uses where numpy is missing: the BM25 of ``stores.lexical``, computed in SQL."""
    from tests.test_lexical_index import assert_same_top, brute_force, stored, top

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
        bank = stored(store)
        for _ in range(40):
            terms = rng.sample(WORDS, rng.randint(1, 4))
            ours = [(c.lesson_id, c.relevance) for c in store.search(LessonQuery("default"), terms, 10)]
            assert_same_top(ours, top(brute_force(bank, terms), 10))
    finally:
        store.close()
