"""A full load (the first sync without a snapshot, or a reload) reads the store a page at a time:
the lexical base built from pages equals one built from a single read, to the array; a lesson
rewritten or deleted while the pages are read ends as one read would leave it; a store whose
``vector_changes`` takes no ``limit`` still loads, in one page."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery, VectorChanges, vector_pages
from lessonbank.retrieval import lexical_index, lexical_load, vector
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.retrieval.lexical_load import PagedBase, newest
from lessonbank.retrieval.vector import VectorIndex, as_bytes
from lessonbank.stores.lexical import LEXICAL_SPACE, TERM_RECORD
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.test_lexical_index import NS, random_lesson, vocabulary


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "bank.db", clock=Clock())
    yield opened
    opened.close()


def term_vector(length: int, postings: list[tuple[int, float]]) -> bytes:
    return TERM_RECORD.pack(0, 0.0, length) + b"".join(TERM_RECORD.pack(t, tf, 0) for t, tf in postings)


def built(pages: list[list[tuple[str, bytes]]]) -> tuple[Any, list[tuple[str, bytes]]]:
    skipped: list[tuple[str, bytes]] = []

    def well_formed(lesson_id: str, vector: bytes) -> bool:
        ok = bool(vector) and not len(vector) % TERM_RECORD.size and TERM_RECORD.unpack_from(vector)[0] == 0
        if not ok:
            skipped.append((lesson_id, vector))
        return ok

    base = PagedBase(well_formed)
    for page in pages:
        base.add(page)
    return base.finish(), skipped


terms = st.sampled_from([1, 2, 3, 2**63, 2**64 - 1, 2**58 + 5, 12345678901234567, 2**40])
rows = st.lists(
    st.tuples(
        st.sampled_from([f"les{n}" for n in range(12)]),
        st.one_of(
            st.builds(
                term_vector,
                st.integers(1, 90),
                st.lists(
                    st.tuples(terms, st.sampled_from([1.0, 2.0, 0.5])), max_size=5, unique_by=lambda p: p[0]
                ),
            ),
            st.sampled_from([b"", b"\x01" * 16, b"\x00" * 7]),  # malformed: skipped, never a slot
        ),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(rows, st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_a_base_built_from_pages_equals_one_built_from_a_single_read(
    every: list[tuple[str, bytes]], sizes: list[int]
) -> None:
    """The lessons met again in a later page (rewritten meanwhile) keep only their last row, in the
    order of those last rows, as a single read's newest-write-per-lesson has it."""
    pages, start = [], 0
    while start < len(every):
        size = sizes[len(pages) % len(sizes)]
        pages.append(every[start : start + size])
        start += size
    paged, _ = built(pages)
    whole, _ = built([newest(every)])
    assert paged.ids == whole.ids
    for name in ("length", "terms", "starts", "docs", "tf"):
        got, want = getattr(paged, name), getattr(whole, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    # Against the rows themselves: each kept lesson's postings are its last well-formed row's.
    last = dict(newest(every))
    kept = [i for i, v in last.items() if v and not len(v) % TERM_RECORD.size and v[:8] == b"\0" * 8]
    assert whole.ids == kept
    for slot, lesson_id in enumerate(whole.ids):
        records = list(TERM_RECORD.iter_unpack(last[lesson_id]))
        assert whole.length[slot] == records[0][2]
        held = {
            int(whole.terms[t]): float(whole.tf[p])
            for t in range(len(whole.terms))
            for p in range(int(whole.starts[t]), int(whole.starts[t + 1]))
            if whole.docs[p] == slot
        }
        assert held == {t: tf for t, tf, _ in records[1:]}
    assert np.all(np.diff(whole.terms.astype(object)) > 0)  # each term once, ascending
    for t in range(len(whole.terms)):  # slots ascending within a term
        docs = whole.docs[whole.starts[t] : whole.starts[t + 1]]
        assert np.all(np.diff(docs) > 0)


def searches(index: LexicalIndex, store: SQLiteStore, vocab: list[str]) -> list[list[tuple[str, float]]]:
    rng, scope, out = random.Random(11), LessonQuery(NS), []
    for _ in range(25):
        words = rng.sample(vocab, rng.randint(1, 12))
        found = index.search(words, 10, lambda ids: store.candidates(scope, ids), scope, exhaustive=True)
        out.append([(c.lesson_id, c.relevance) for c in found])
    return out


def fresh(store: SQLiteStore) -> LexicalIndex:
    index = LexicalIndex(store, NS)
    index._snapshot = None  # a full load every time
    return index


def filled(store: SQLiteStore, lessons: int = 150) -> list[str]:
    rng, clock = random.Random(4), Clock()
    vocab = vocabulary(rng, 120)
    store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(lessons)])
    return vocab


def paged_reads(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, after_first: Any = None) -> list[int]:
    """The size of every page the term vectors are read in; ``after_first`` runs once, after the
    first page is read (a writer between two pages)."""
    sizes: list[int] = []
    real = store.vector_changes

    def recorded(namespace: str, model: str, after: int, limit: int | None = None) -> VectorChanges:
        page = real(namespace, model, after, limit)
        if model == LEXICAL_SPACE and limit is not None:
            sizes.append(len(page.rows))
            if len(sizes) == 1 and after_first is not None:
                after_first()
        return page

    monkeypatch.setattr(store, "vector_changes", recorded)
    return sizes


def test_the_index_loads_in_pages_and_answers_as_one_read(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocab = filled(store)
    whole = searches(fresh(store), store, vocab)
    monkeypatch.setattr(lexical_index, "LOAD_PAGE", 7)
    sizes = paged_reads(store, monkeypatch)
    index = fresh(store)
    assert searches(index, store, vocab) == whole
    assert len(index) == 150 and sizes == [7] * 21 + [3]


def test_a_lesson_rewritten_between_two_pages_is_held_once_as_rewritten(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocab = filled(store)
    first = store.vector_changes(NS, LEXICAL_SPACE, 0, 5).rows[0][0]

    def rewrite() -> None:
        lesson = store.get_lesson(first)
        assert lesson is not None
        store.update_lesson(lesson.model_copy(update={"content": "zanzibar quokka rewritten text"}))

    monkeypatch.setattr(lexical_index, "LOAD_PAGE", 5)
    sizes = paged_reads(store, monkeypatch, rewrite)
    index = fresh(store)
    hits = index.search(["quokka"], 5, lambda ids: store.candidates(LessonQuery(NS), ids), LessonQuery(NS))
    assert [c.lesson_id for c in hits] == [first]
    assert len(index) == 150 and sum(sizes) == 151  # one load: every row once, the rewritten one again
    monkeypatch.undo()
    assert searches(index, store, [*vocab, "zanzibar"]) == searches(fresh(store), store, [*vocab, "zanzibar"])


def test_a_lesson_deleted_between_two_pages_is_not_held(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocab = filled(store)
    first = store.vector_changes(NS, LEXICAL_SPACE, 0, 5).rows[0][0]
    monkeypatch.setattr(lexical_index, "LOAD_PAGE", 5)
    sizes = paged_reads(store, monkeypatch, lambda: store.delete_lesson(NS, first))
    index = fresh(store)
    index.sync()
    assert len(index) == 149 and first not in index._slot_of
    assert sum(sizes) == 150  # one load: the delete is found without reading every row again
    monkeypatch.undo()
    assert searches(index, store, vocab) == searches(fresh(store), store, vocab)


def test_a_store_without_pages_loads_in_one_read(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written against the older port (``vector_changes`` without ``limit``)."""
    vocab = filled(store, 40)
    whole = searches(fresh(store), store, vocab)
    calls: list[int] = []
    real = store.vector_changes

    def older(namespace: str, model: str, after: int) -> VectorChanges:
        calls.append(after)
        return real(namespace, model, after)

    monkeypatch.setattr(store, "vector_changes", older)
    monkeypatch.setattr(lexical_index, "LOAD_PAGE", 3)
    assert [len(page.rows) for page in vector_pages(store, NS, LEXICAL_SPACE, 3)] == [40]
    index = fresh(store)
    assert searches(index, store, vocab) == whole and calls[:1] == [0]


def test_the_vector_index_loads_in_pages(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    dim, model = 8, "test-embedder"
    lessons = [Lesson(namespace=NS, content=f"vector lesson {n}") for n in range(60)]
    store.import_lessons(lessons)
    rng = np.random.default_rng(3)
    store.put_vectors(
        NS, model, [(x.id, f"h{n}", as_bytes(rng.standard_normal(dim))) for n, x in enumerate(lessons)]
    )
    store.put_vectors(NS, model, [(lessons[4].id, "h4b", struct.pack("<8f", *([1.0] * 8)))])

    def answers(index: VectorIndex) -> list[list[tuple[str, float]]]:
        queries = np.random.default_rng(5).standard_normal((6, dim)).astype(np.float32)
        return [index.search(q, 10) for q in queries]

    whole = VectorIndex(store, NS, model, dim)
    whole._snapshot = None
    want = answers(whole)
    monkeypatch.setattr(vector, "LOAD_PAGE", 7)
    reads: list[int | None] = []
    real = store.vector_changes

    def recorded(namespace: str, name: str, after: int, limit: int | None = None) -> VectorChanges:
        reads.append(limit)
        return real(namespace, name, after, limit)

    monkeypatch.setattr(store, "vector_changes", recorded)
    paged = VectorIndex(store, NS, model, dim)
    paged._snapshot = None
    assert answers(paged) == want and len(paged) == 60
    assert reads.count(7) == 9  # 60 rows, 7 a page


def test_the_load_page_is_a_module_setting() -> None:
    assert lexical_index.LOAD_PAGE >= 1_000 and vector.LOAD_PAGE == lexical_index.LOAD_PAGE
    assert lexical_load.BUCKETS == 1 << lexical_load.BUCKET_BITS
