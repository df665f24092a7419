"""The in-process vector index over a real SQLite store: exact and two-step search, keeping in step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lessonbank.models import Lesson
from lessonbank.retrieval.vector import BINARY_FROM, MIN_RESCORE, RESCORE_SHARE, VectorIndex, as_bytes
from lessonbank.stores.sqlite import SQLiteStore

DIM = 48


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(str(tmp_path / "bank.db"))
    yield store
    store.close()


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _fill(store: SQLiteStore, vectors: np.ndarray, start: int = 0) -> list[str]:
    lessons = [Lesson(namespace="t", content=f"lesson {start + i}") for i in range(len(vectors))]
    store.import_lessons(lessons)
    ids = [lesson.id for lesson in lessons]
    for offset in range(0, len(ids), 2_000):
        store.put_vectors(
            "t",
            "m",
            [(ids[i], f"h{i}", as_bytes(vectors[i])) for i in range(offset, min(len(ids), offset + 2_000))],
        )
    return ids


def test_exact_search_matches_a_brute_force_ranking(store: SQLiteStore) -> None:
    rng = np.random.default_rng(1)
    vectors = _unit(rng.standard_normal((300, DIM)))
    ids = _fill(store, vectors)
    index = VectorIndex(store, "t", "m", DIM)
    query = _unit(rng.standard_normal(DIM))
    expected = [ids[i] for i in np.argsort(-(vectors @ query))[:10]]
    found = index.search(query, 10)
    assert [lesson_id for lesson_id, _ in found] == expected
    assert found[0][1] == pytest.approx(float(np.max(vectors @ query)), abs=1e-5)
    assert index.search(query, 3, exclude=frozenset(expected[:1]))[0][0] == expected[1]
    with pytest.raises(ValueError, match="dimensions"):
        index.search(np.zeros(DIM + 1, np.float32), 3)


def test_a_memory_mapped_matrix_answers_as_the_in_memory_one(store: SQLiteStore) -> None:
    """Past ``mapped_from`` rows the vectors live in a mapped file: same answers, and the
    process's own memory holds the ids (and bits) only."""
    rng = np.random.default_rng(5)
    vectors = _unit(rng.standard_normal((3_000, DIM)))
    ids = _fill(store, vectors)
    in_memory = VectorIndex(store, "t", "m", DIM)
    mapped = VectorIndex(store, "t", "m", DIM, mapped_from=1_024)
    for query in _unit(rng.standard_normal((5, DIM))):
        assert mapped.search(query, 10) == in_memory.search(query, 10)
    assert mapped.memory()["mapped"] == 1 and in_memory.memory()["mapped"] == 0
    resident = in_memory.memory()["resident"] - mapped.memory()["resident"]
    assert resident == in_memory.memory()["matrix"] == mapped.memory()["matrix"]

    # Growing past the mapped capacity, a rewrite, and a reload keep every vector.
    more = _unit(rng.standard_normal((2_000, DIM)))
    ids += _fill(store, more, start=3_000)
    store.put_vectors("t", "m", [(ids[7], "moved", as_bytes(more[0]))])
    mapped.mark_stale()
    assert mapped.search(more[0], 2)[0][0] in {ids[7], ids[3_000]}
    assert len(mapped) == 5_000
    assert np.allclose(mapped.vectors()[ids[4_999]], more[-1])
    store.delete_lesson("t", ids[0])
    mapped.sync(force=True)  # a delete has no sequence number: the index reloads
    assert len(mapped) == 4_999 and mapped.memory()["mapped"] == 1


@pytest.mark.slow
def test_the_two_step_search_keeps_the_true_neighbours(store: SQLiteStore) -> None:
    dim = 384  # as real embedders: the sign bits of 48 dimensions would say too little
    rng = np.random.default_rng(2)
    centres = _unit(rng.standard_normal((200, dim)))
    count = max(BINARY_FROM, MIN_RESCORE * RESCORE_SHARE) + 5_000

    def clustered(n: int) -> np.ndarray:
        return _unit(centres[rng.integers(0, 200, n)] + 0.06 * rng.standard_normal((n, dim)))

    vectors = clustered(count)
    ids = _fill(store, vectors)
    index = VectorIndex(store, "t", "m", dim)

    def check(vectors: np.ndarray, ids: list[str]) -> None:
        overlap = []
        for i in rng.integers(0, len(vectors), 30):
            query = _unit(vectors[i] + 0.01 * rng.standard_normal(dim))
            exact = {ids[j] for j in np.argsort(-(vectors @ query))[:10]}
            found = index.search(query, 10)
            assert found[0][0] == ids[i]  # the planted near-copy always comes first
            overlap.append(len(exact & {lesson_id for lesson_id, _ in found}) / 10)
        assert np.mean(overlap) >= 0.95

    check(vectors, ids)
    assert index._bits is not None and index._bits_rows == count  # the two steps ran

    # Rows added after the bits were built, and a row rewritten, are searched by their new bits.
    more = clustered(3_000)
    ids += _fill(store, more, start=count)
    vectors = np.concatenate([vectors, more])
    moved = _unit(rng.standard_normal(dim))
    store.put_vectors("t", "m", [(ids[11], "h-moved", as_bytes(moved))])
    vectors[11] = moved
    index.mark_stale()
    assert index.search(moved, 1)[0][0] == ids[11]
    assert index._bits_rows == len(vectors)
    check(vectors, ids)

    index.binary = False  # numpy < 2.0 has no bitwise_count: the exact scan answers alike
    assert index.search(vectors[0], 1)[0][0] == ids[0]


def test_new_rewritten_and_deleted_vectors_are_followed(store: SQLiteStore) -> None:
    rng = np.random.default_rng(3)
    vectors = _unit(rng.standard_normal((50, DIM)))
    ids = _fill(store, vectors)
    index = VectorIndex(store, "t", "m", DIM, refresh_s=3600)
    assert len(index) == 0
    index.sync(force=True)
    assert len(index) == 50
    [extra] = _fill(store, _unit(rng.standard_normal((1, DIM))), start=50)
    target = _unit(rng.standard_normal(DIM))
    store.put_vectors("t", "m", [(ids[7], "h-new", as_bytes(target))])
    index.search(target, 1)
    assert len(index) == 50  # within refresh_s of the last sync, and not told: not seen yet
    index.mark_stale()
    assert index.search(target, 1)[0] == (ids[7], pytest.approx(1.0, abs=1e-5))
    assert len(index) == 51 and extra in {i for i, _ in index.search(target, 51)}
    store.delete_lesson("t", ids[7])
    index.mark_stale()
    assert ids[7] not in {i for i, _ in index.search(target, 51)}
    assert len(index) == 50


def test_vectors_of_another_size_are_ignored(store: SQLiteStore) -> None:
    [good, bad] = _fill(store, _unit(np.ones((2, DIM))))
    store.put_vectors("t", "m", [(bad, "h", as_bytes(np.ones(DIM + 3, np.float32)))])
    index = VectorIndex(store, "t", "m", DIM, refresh_s=0.0)
    assert [lesson_id for lesson_id, _ in index.search(_unit(np.ones(DIM)), 5)] == [good]
    seq = index._seq
    index.search(_unit(np.ones(DIM)), 5)  # the odd row is remembered, so no full reload follows
    assert index._seq == seq and len(index) == 1


def test_a_big_load_hands_freed_memory_back(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows a full load reads are freed once the matrix holds them, and the C heap's free pages
    are handed back (a no-op where the C library cannot)."""
    from lessonbank.retrieval import vector

    calls: list[int] = []
    monkeypatch.setattr(vector, "GIVE_BACK_FROM", 100)
    monkeypatch.setattr(vector, "give_back_memory", lambda: calls.append(1))
    rng = np.random.default_rng(9)
    _fill(store, _unit(rng.standard_normal((150, DIM))))
    index = VectorIndex(store, "t", "m", DIM, refresh_s=0.0)
    index.sync()
    assert len(index) == 150 and calls == [1]
    index.sync()  # nothing new: nothing to hand back
    assert calls == [1]


def test_giving_memory_back_is_safe_anywhere() -> None:
    from lessonbank.retrieval.lexical_index import give_back_memory

    give_back_memory()  # glibc: trims; elsewhere: does nothing, and never raises
