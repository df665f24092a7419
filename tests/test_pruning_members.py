"""The long posting lists' bits (``membership``) and the words cut from one pool of postings
(``Word.within``) change how a pruned search finds slots, never what it returns: positions equal
numpy's binary search, scores equal the word-by-word sums bit for bit, and an index whose every word
has bits ranks as the exhaustive scorer through adds, rewrites, deletes and a restored snapshot."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessonbank.ports import LessonQuery
from lessonbank.retrieval import lexical_index, pruning, word_bounds
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.retrieval.membership import Membership, held_at
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.test_lexical_index import NS, random_lesson, vocabulary, zipf_words
from tests.test_pruning import answers, exhaustive, postings


@pytest.fixture(autouse=True)
def bits_for_any_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pruning, "BITS_FROM", 0)  # the bits searched for a single slot too


@settings(max_examples=300, deadline=None)
@given(
    slots=st.integers(1, 700),
    share=st.sampled_from([0.0, 0.02, 0.5, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    beyond=st.integers(0, 300),
)
def test_bits_find_a_slot_where_a_binary_search_does(
    slots: int, share: float, seed: int, beyond: int
) -> None:
    rng = np.random.default_rng(seed)
    docs = np.flatnonzero(rng.random(slots) < share).astype(np.int32)
    needles = np.sort(rng.integers(0, slots + beyond, size=int(rng.integers(1, 200)))).astype(np.int32)
    found = Membership(docs, slots).searchsorted(needles)
    assert found.tolist() == np.searchsorted(docs, needles).tolist()


@settings(max_examples=200, deadline=None)
@given(
    slots=st.integers(1, 700),
    shares=st.lists(st.sampled_from([0.0, 0.02, 0.5, 1.0]), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_many_lists_bits_find_slots_where_binary_searches_do(
    slots: int, shares: list[float], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    lists = [np.flatnonzero(rng.random(slots) < share).astype(np.int32) for share in shares]
    members = [Membership(docs, slots) for docs in lists]
    for member in members:
        member.build()
    needles = np.sort(rng.integers(0, slots, size=int(rng.integers(1, 200)))).astype(np.int32)
    held, at = held_at(members, needles)
    for row, docs in enumerate(lists):
        assert at[row].tolist() == np.searchsorted(docs, needles).tolist()
        assert held[row].tolist() == np.isin(needles, docs).tolist()


def pooled(words: list[pruning.Word], bits: list[bool]) -> list[pruning.Word]:
    """The same words with their base postings cut from one pair of arrays (as an index's base
    holds them), some with bits."""
    pool_docs = np.concatenate([w.docs for w in words]).astype(np.int32)
    pool_tf = np.concatenate([w.tf for w in words]).astype(np.float32)
    slots = int(pool_docs.max()) + 1 if len(pool_docs) else 1
    out, start = [], 0
    for word, bit in zip(words, bits, strict=False):
        end = start + len(word.docs)
        copy = pruning.Word(
            pool_docs[start:end], pool_tf[start:end], word.extra_docs, word.extra_tf, word.weight,
            word.bound, word.codes, word.unit,
        )  # fmt: skip
        copy.within = (pool_docs, pool_tf, start)
        copy.member = Membership(copy.docs, slots) if bit else None
        if copy.member is not None and start % 2:
            copy.member.build()  # built ones are read together (``held_at``), the rest on first use
        out.append(copy)
        start = end
    return out


@settings(max_examples=300, deadline=None)
@given(postings(), st.lists(st.booleans(), min_size=12, max_size=12), st.integers(0, 2**32 - 1))
def test_pooled_words_with_bits_score_and_rank_as_the_words_apart(
    case: tuple[list[pruning.Word], Any, Any, int, int], bits: list[bool], pick: int
) -> None:
    words, norm, keep, want, seed = case
    together = pooled(words, bits)
    rng = np.random.default_rng(pick)
    slots = np.sort(rng.choice(len(norm), size=min(len(norm), 1 + pick % 60), replace=False)).astype(np.int32)
    expected = np.zeros(len(slots))
    for word in words:
        expected += pruning._looked_up(word, slots, norm)
    assert pruning.exact_scores(together, slots, norm).tolist() == expected.tolist()
    assert pruning.exact_scores(words, slots, norm).tolist() == expected.tolist()
    for word, copy in zip(words, together, strict=True):
        assert (
            pruning._looked_up(copy, slots, norm).tolist() == pruning._looked_up(word, slots, norm).tolist()
        )
    found, scores = pruning.top_slots(together, norm, keep, want, seed=seed)
    expected_slots, expected_scores = exhaustive(words, norm, keep, want)
    assert found.tolist() == expected_slots.tolist()
    assert scores.tolist() == expected_scores.tolist()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_bits_follow_the_base_through_changes_and_a_restored_snapshot(seed: int) -> None:
    """Every base word with bits, pruning from the first posting; a snapshot written, changes
    after it, then a new index restored from it: each answers as the exhaustive scorer."""
    rng, clock = random.Random(seed), Clock()
    vocab = vocabulary(rng, 40)
    with (
        pytest.MonkeyPatch.context() as patch,
        tempfile.TemporaryDirectory() as tmp,
    ):
        patch.setattr(word_bounds, "MEMBER_SHARE", 10**9)
        patch.setattr(pruning, "BITS_FROM", 0)
        patch.setattr(pruning, "SEED_POSTINGS", 16)
        patch.setattr(lexical_index, "PRUNE_FROM", 0)
        patch.setattr(lexical_index, "PRUNE_PER_WORD", 0)
        patch.setattr(lexical_index, "SNAPSHOT_MIN", 20)
        patch.setattr(lexical_index, "DELTA_MIN", 8)
        restored: list[bool] = []
        restore = LexicalIndex._restore

        def spied(self: LexicalIndex) -> bool:
            restored.append(restore(self))
            return restored[-1]

        patch.setattr(LexicalIndex, "_restore", spied)
        store = SQLiteStore(Path(tmp) / "bank.db", clock=clock)
        try:
            store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(80)])
            first = LexicalIndex(store, NS)

            def check(index: LexicalIndex) -> None:
                for _ in range(4):
                    terms = zipf_words(rng, vocab, rng.choice([3, 12, 40]))
                    pruned, reference = answers(index, store, terms, rng.choice([1, 5]), LessonQuery(NS))
                    assert pruned == reference

            check(first)  # builds the base and writes the snapshot
            assert first._bounds is not None
            assert any(m.bits is not None for m in first._bounds.members.values())  # bits were made
            for _ in range(30):  # into the delta, then past it (a rebuild makes a new base)
                bank = store.list_lessons(LessonQuery(NS), limit=10_000)
                if rng.random() < 0.3 and bank:
                    store.delete_lesson(NS, rng.choice(bank).id)
                else:
                    store.write_lesson(random_lesson(rng, vocab, clock))
                if rng.random() < 0.2:
                    check(first)
            check(first)
            assert first._builds >= 2  # the base was rebuilt, its bits made anew
            check(LexicalIndex(store, NS))  # restored from a snapshot, changes since applied
            assert restored[-1]
        finally:
            store.close()


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 20_000),
    size=st.integers(1, 40),
    levels=st.sampled_from([3, 50, 10**6]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_best_few_bounds_are_the_highest(count: int, size: int, levels: int, seed: int) -> None:
    """The slots picked for a threshold are ``size`` of the highest partial bounds (ties many), taken
    through a sample or not."""
    values = np.random.default_rng(seed).integers(0, levels, count).astype(np.float32)
    size = min(size, count)
    picked = pruning._best(values, size)
    assert len(set(picked.tolist())) == size
    assert sorted(values[picked].tolist()) == sorted(values.tolist())[count - size :]
