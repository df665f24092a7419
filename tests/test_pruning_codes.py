"""A base built from rows has every word's bounds, codes and long lists' bits at once
(``WordBounds.fill_all``): the same figures, to the bit, as computing each word on its first use
(``WordBounds.fill``), and ready before any query, so no query pays for a word's first use."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.ports import LessonQuery
from lessonbank.retrieval import lexical_index, snapshot, word_bounds
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.test_lexical_index import NS, random_lesson, vocabulary, zipf_words
from tests.test_pruning import answers


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    slots=st.integers(1, 2_000),
    words=st.integers(1, 200),
    chunk=st.sampled_from([1, 7, 300, 1 << 20]),
    at_token=st.sampled_from([0.0, 0.02, 0.37, 3.0]),
)
def test_every_word_at_once_is_each_word_on_first_use(
    seed: int, slots: int, words: int, chunk: int, at_token: float
) -> None:
    rng = np.random.default_rng(seed)
    counts = np.minimum(rng.integers(1, max(2, slots), size=words), slots)
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    docs = np.concatenate([np.sort(rng.choice(slots, size=int(c), replace=False)) for c in counts])
    docs = docs.astype(np.int32)
    tf = rng.choice(np.array([1.0, 1.5, 2.0, 4.0], dtype=np.float32), size=len(docs))
    length = rng.integers(1, 60, size=slots).astype(np.float64)
    each, whole = word_bounds.WordBounds(words, at_token), word_bounds.WordBounds(words, at_token)
    each.fill(starts, docs, tf, length, range(words))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(word_bounds, "FILL_CHUNK", chunk)  # runs of words cut anywhere
        whole.fill_all(starts, docs, tf, length)
    for name in ("max_tf", "min_length", "impact"):
        assert np.array_equal(getattr(each, name), getattr(whole, name)), name
    for word in range(words):
        assert np.array_equal(each.word_codes(word, starts), whole.word_codes(word, starts))
    assert each.members.keys() == whole.members.keys()
    for word, member in whole.members.items():
        assert member.bits is not None  # made with the base, not on a search's first look-up
        needles = np.arange(slots + 70)
        assert np.array_equal(member.searchsorted(needles), each.members[word].searchsorted(needles))


def test_a_base_built_from_rows_is_bounded_before_any_query(tmp_path: Path) -> None:
    """Loaded in full, then rebuilt past its delta: each base has every word's figures and bits
    before a query names them, and ranks as the exhaustive scorer."""
    rng, clock = random.Random(5), Clock()
    vocab = vocabulary(rng, 30)
    store = SQLiteStore(tmp_path / "bank.db", clock=clock)
    try:
        store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(60)])
        index = LexicalIndex(store, NS)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(word_bounds, "MEMBER_SHARE", 4)  # lists of a quarter of the lessons get bits
            index.sync()
            ready(index)
            patch.setattr("lessonbank.retrieval.lexical_index.DELTA_MIN", 4)
            for _ in range(12):
                store.write_lesson(random_lesson(rng, vocab, clock))
            builds = index._builds
            index.sync()  # past the delta: a new base
            assert index._builds == builds + 1
            ready(index)
        for _ in range(5):
            pruned, reference = answers(index, store, zipf_words(rng, vocab, 12), 5, LessonQuery(NS))
            assert pruned == reference
    finally:
        store.close()


def ready(index: LexicalIndex) -> None:
    bounds = index._bounds
    assert bounds is not None and bounds.coded is not None
    assert len(bounds.coded) == len(index._docs)
    assert not np.isnan(bounds.max_tf).any()
    assert bounds.members and all(member.bits is not None for member in bounds.members.values())


def test_a_restored_index_reads_every_words_figures_from_its_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot keeps each word's bounds and its postings' codes: a new process has them before
    any query, the same as the index that wrote them, and ranks as the exhaustive scorer."""
    monkeypatch.setattr(lexical_index, "SNAPSHOT_MIN", 50)
    rng, vocab = random.Random(8), vocabulary(random.Random(8), 200)
    clock = Clock()
    store = SQLiteStore(tmp_path / "bank.db", clock=clock)
    try:
        store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(300)])
        built = LexicalIndex(store, NS)
        built.sync()
        assert snapshot_file(tmp_path).exists()
        restored = LexicalIndex(store, NS)
        restored.sync()
        assert restored._unchecked is not None  # taken from the file, not loaded
        assert built._bounds is not None and restored._bounds is not None
        for name in ("max_tf", "min_length", "impact", "coded"):
            assert np.array_equal(getattr(built._bounds, name), getattr(restored._bounds, name)), name
        assert restored._bounds.at_token == built._bounds.at_token
        for _ in range(6):
            pruned, reference = answers(restored, store, zipf_words(rng, vocab, 30), 5, LessonQuery(NS))
            assert pruned == reference
    finally:
        store.close()


def test_a_damaged_code_in_the_snapshot_is_caught_before_a_search_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Codes are checked with their block of postings: a code set to 0 (it would drop lessons that
    can score) makes the index reload in full before it answers, with the reason logged."""
    monkeypatch.setattr(lexical_index, "SNAPSHOT_MIN", 50)
    rng, vocab = random.Random(9), vocabulary(random.Random(9), 200)
    clock = Clock()
    store = SQLiteStore(tmp_path / "bank.db", clock=clock)
    try:
        store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(300)])
        LexicalIndex(store, NS).sync()
        file = snapshot_file(tmp_path)
        data = bytearray(file.read_bytes())
        _, header_length = snapshot.PREFIX.unpack_from(data)
        header = json.loads(bytes(data[snapshot.PREFIX.size : snapshot.PREFIX.size + header_length]))
        start = snapshot.aligned(snapshot.PREFIX.size + header_length, snapshot.ALIGN)
        offset, count = header["arrays"]["codes"]
        data[start + offset + count // 2] = 0
        file.write_bytes(bytes(data))
        restored = LexicalIndex(store, NS)
        restored.sync()
        assert restored._unchecked is not None  # the codes are not read until a search needs them
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            for _ in range(6):
                pruned, reference = answers(restored, store, vocab, 5, LessonQuery(NS))  # every word
                assert pruned == reference
        assert any("does not match its checksum" in record.getMessage() for record in caplog.records)
    finally:
        store.close()


def snapshot_file(folder: Path) -> Path:
    [file] = sorted(Path(f"{folder / 'bank.db'}.lexicon").glob("*.snap"))
    return file
