"""The pruned top-k is the exhaustive scorer's top-k: same lessons, same scores to the last bit, same
order (ties by write order), over random corpora, queries, changes and filters.

Two levels: ``pruning.top_slots`` against a plain numpy BM25 over random postings (fast, so many
examples, with ties on purpose), and ``LexicalIndex.search`` against ``exhaustive=True`` on a real
SQLite bank that receives adds, rewrites and deletes, searched with scopes and status filters."""

from __future__ import annotations

import contextlib
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessonbank.errors import InputError
from lessonbank.ports import LessonQuery
from lessonbank.retrieval import lexical_index, pruning, word_bounds
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.stores.lexical import BM25_B, BM25_K1
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.test_lexical_index import NS, random_lesson, vocabulary, zipf_words

# The reads and passes run compiled (retrieval/_postings.c; "threads": every read by two threads) or
# with numpy: each gives the same ranking.
LOOPS = pytest.mark.parametrize("loops", ["compiled", "threads", "numpy"])


@contextlib.contextmanager
def running(loops: str) -> Any:
    if loops != "numpy" and pruning._postings is None:
        pytest.skip("the compiled loops (retrieval/_postings.c) were not built here")
    with pytest.MonkeyPatch.context() as patch:
        if loops == "numpy":
            patch.setattr(pruning, "_postings", None)
        if loops == "threads":
            patch.setattr(pruning, "THREADS_FROM", 0)
            patch.setattr(pruning, "READ_THREADS", 2)
        yield


@pytest.fixture(autouse=True)
def always_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical_index, "PRUNE_FROM", 0)  # small banks too: the pruned path is under test
    monkeypatch.setattr(lexical_index, "PRUNE_PER_WORD", 0)
    monkeypatch.setattr(pruning, "SEED_POSTINGS", 16)  # small banks pass every phase of the search


# ------------------------------------------------------------------ top_slots on random postings


@st.composite
def postings(draw: st.DrawFn) -> tuple[list[pruning.Word], Any, Any, int, int]:
    """Random words over a few hundred slots; frequencies and lengths from small sets, so many
    lessons tie; some slots dead; part of some words in a delta past the base; the base's postings
    of some words coded (``quantize``) at another mean length than the query's, as a base built
    before lessons were added or a recall scoped to a slice codes them."""
    slots = draw(st.integers(1, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    length = rng.choice([3.0, 5.0, 8.0, 20.0], size=slots)
    keep = rng.random(slots) > draw(st.sampled_from([0.0, 0.1, 0.6])) if draw(st.booleans()) else None
    live = int(keep.sum()) if keep is not None else slots
    total = float(length[keep].sum()) if keep is not None else float(length.sum())
    per_token = BM25_K1 * BM25_B * max(live, 1) / (total or 1.0)
    norm = BM25_K1 * (1.0 - BM25_B) + per_token * length
    base_slots = draw(st.integers(0, slots))
    words = []
    for _ in range(draw(st.integers(1, 12))):
        share = draw(st.sampled_from([0.01, 0.1, 0.5, 0.9]))
        held = np.flatnonzero(rng.random(slots) < share).astype(np.int32)
        tf = rng.choice(np.array([1.0, 1.0, 2.0, 1.5, 4.0], dtype=np.float32), size=len(held))
        base, extra = held < base_slots, held >= base_slots
        weight = float(rng.choice([0.5, 1.7, 3.0]))
        ratio = tf.astype(np.float64) / (tf + norm[held])
        loose = draw(st.floats(1.0, 3.0))  # a bound may be loose, never low
        bound = weight * float(ratio.max()) * loose if len(held) else 0.0
        word = pruning.Word(held[base], tf[base], held[extra], tf[extra], weight, bound)
        if draw(st.booleans()) and base.any():
            at = per_token * draw(st.sampled_from([0.3, 1.0, 2.5]))
            at_ratio = tf[base].astype(np.float64) / (
                tf[base] + BM25_K1 * (1.0 - BM25_B) + at * length[held[base]]
            )
            impact = float(at_ratio.max())
            word.codes = word_bounds.quantize(at_ratio, impact)
            word.unit = impact * word_bounds.drift(at, per_token) / word_bounds.LEVELS
        words.append(word)
    return words, norm, keep, draw(st.integers(1, 40)), draw(st.sampled_from([1, 8, 64, 100_000]))


def exhaustive(words: list[pruning.Word], norm: Any, keep: Any, want: int) -> tuple[Any, Any]:
    """Every posting scored and summed per slot in the words' order, ranked by score then slot."""
    held, contributions = [], []
    for word in words:
        docs = np.concatenate((word.docs, word.extra_docs))
        tf = np.concatenate((word.tf, word.extra_tf)).astype(np.float64)
        if keep is not None:
            docs, tf = docs[keep[docs]], tf[keep[docs]]
        held.append(docs)
        contributions.append(word.weight * (tf / (norm[docs] + tf)))
    if not held:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    acc = np.bincount(np.concatenate(held), weights=np.concatenate(contributions), minlength=len(norm))
    found = np.flatnonzero(acc)
    order = np.lexsort((found, -acc[found]))[:want]
    return found[order], acc[found[order]]


@LOOPS
@settings(max_examples=400, deadline=None)
@given(postings())
def test_top_slots_is_the_head_of_the_exhaustive_ranking(
    loops: str, case: tuple[list[pruning.Word], Any, Any, int, int]
) -> None:
    words, norm, keep, want, seed = case
    with running(loops):
        slots, scores = pruning.top_slots(words, norm, keep, want, seed=seed)
    expected_slots, expected_scores = exhaustive(words, norm, keep, want)
    assert slots.tolist() == expected_slots.tolist()
    assert scores.tolist() == expected_scores.tolist()  # bit for bit: same sums in the same order


@settings(max_examples=200, deadline=None)
@given(postings(), st.integers(1, 40))
def test_words_read_together_in_small_chunks_rank_the_same(
    case: tuple[list[pruning.Word], Any, Any, int, int], chunk: int
) -> None:
    """The words numpy reads at once are laid end to end a few postings at a time (a word longer
    than a chunk alone): the bounds summed are the same, so the ranking is still the exhaustive one."""
    words, norm, keep, want, seed = case
    with running("numpy"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(pruning, "READ_CHUNK", chunk)
        slots, scores = pruning.top_slots(words, norm, keep, want, seed=seed)
    expected_slots, expected_scores = exhaustive(words, norm, keep, want)
    assert slots.tolist() == expected_slots.tolist()
    assert scores.tolist() == expected_scores.tolist()


@LOOPS
def test_a_low_bound_would_be_caught(loops: str) -> None:
    """The check above can fail: a word whose bound is below what it gives loses lessons."""
    norm = np.full(51, 1.0)
    empty_docs, empty_tf = np.zeros(0, np.int32), np.zeros(0, np.float32)
    rare = pruning.Word(  # enough postings alone for the first threshold (SEED_SHARE × want)
        np.arange(6, dtype=np.int32), np.full(6, 4.0, np.float32), empty_docs, empty_tf, 3.0, 3.0
    )
    common_tf = np.ones(45, np.float32)
    common_tf[40:] = 40.0  # the bound says at most 0.01; slots 46-50 get ~4.9
    common = pruning.Word(np.arange(6, 51, dtype=np.int32), common_tf, empty_docs, empty_tf, 5.0, 0.01)
    with running(loops):
        slots, _ = pruning.top_slots([rare, common], norm, None, 3, seed=1)
    assert slots.tolist() == [0, 1, 2]
    assert exhaustive([rare, common], norm, None, 3)[0].tolist() == [46, 47, 48]


@settings(max_examples=300, deadline=None)
@given(
    ratios=st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=50),
    looser=st.sampled_from([1.0, 1.0 + 1e-12, 1.5]),
)
def test_a_code_bounds_its_ratio(ratios: list[float], looser: float) -> None:
    ratio = np.array(ratios)
    impact = float(ratio.max()) * looser
    codes = word_bounds.quantize(ratio, impact)
    assert codes.dtype == np.uint8 and codes.min() >= 1
    assert (ratio <= codes * (impact / word_bounds.LEVELS) * (1 + 1e-12)).all()
    assert (
        codes * (impact / word_bounds.LEVELS) <= ratio + impact / word_bounds.LEVELS * (1 + 1e-9)
    ).all()  # tight


# ------------------------------------------------------------------ the index on a real bank


def answers(
    index: LexicalIndex, store: SQLiteStore, terms: list[str], k: int, query: LessonQuery
) -> list[Any]:
    out = []
    for exhaustive_mode in (False, True):
        found = index.search(
            terms, k, lambda ids: store.candidates(query, ids), scope=query, exhaustive=exhaustive_mode
        )
        out.append([(c.lesson_id, c.relevance) for c in found])
    return out


@LOOPS
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), lessons=st.integers(1, 120), words=st.integers(5, 80))
def test_the_index_ranks_as_the_exhaustive_scorer_through_changes_and_filters(
    loops: str, seed: int, lessons: int, words: int
) -> None:
    rng, clock = random.Random(seed), Clock()
    vocab = vocabulary(rng, words)
    agents = ["a", "b", None]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bank.db", clock=clock)
        try:
            batch = [random_lesson(rng, vocab, clock, agent=rng.choice(agents)) for _ in range(lessons)]
            store.import_lessons(batch)
            index = LexicalIndex(store, NS)
            for step in range(12):
                bank = store.list_lessons(LessonQuery(NS), limit=10_000)
                action = rng.random()
                if action < 0.4 or not bank:
                    store.write_lesson(random_lesson(rng, vocab, clock, agent=rng.choice(agents)))
                elif action < 0.6:
                    old = rng.choice(bank)
                    text = " ".join(zipf_words(rng, vocab, rng.randint(1, 15)))
                    with contextlib.suppress(InputError):  # that text is another lesson's already
                        store.update_lesson(old.model_copy(update={"content": text}))
                elif action < 0.75:
                    store.delete_lesson(NS, rng.choice(bank).id)
                elif action < 0.9:
                    item = rng.choice(bank)
                    store.update_lesson(item.model_copy(update={"status": "archived"}))
                query = rng.choice(
                    [
                        LessonQuery(NS),
                        LessonQuery(NS, agent="a"),
                        LessonQuery(NS, tags=[rng.choice(vocab)]),
                        LessonQuery(NS, kinds=("lesson",)),
                    ]
                )
                terms = zipf_words(rng, vocab, rng.choice([1, 3, 8, 30, 64]))
                with running(loops):
                    pruned, reference = answers(index, store, terms, rng.choice([1, 3, 5, 20]), query)
                assert pruned == reference, f"step {step}"
        finally:
            store.close()


def test_deep_filters_walk_past_the_pruned_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter that turns most of the head away: the pruned search asks deeper each time, then hands
    over to one exhaustive ranking, and still returns what the reference returns."""
    monkeypatch.setattr(lexical_index, "PRUNED_MAX", 64)
    rng, clock = random.Random(4), Clock()
    vocab = vocabulary(rng, 40)
    store = SQLiteStore(tmp_path / "bank.db", clock=clock)
    try:
        lessons = [random_lesson(rng, vocab, clock, agent="rare" if n % 50 == 0 else "x") for n in range(600)]
        store.import_lessons(lessons)
        index = LexicalIndex(store, NS)
        rare = {item.id for item in store.list_lessons(LessonQuery(NS, agent="rare"), limit=1000)}

        def passing(ids: list[str]) -> list[Any]:
            return [c for c in store.candidates(LessonQuery(NS), ids) if c.lesson_id in rare]

        for _ in range(10):
            terms = zipf_words(rng, vocab, 12)
            found = [
                [(c.lesson_id, c.relevance) for c in index.search(terms, 5, passing, exhaustive=mode)]
                for mode in (False, True)
            ]
            assert found[0] == found[1] and len(found[0]) == 5
    finally:
        store.close()


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0]), min_size=1, max_size=80),
    first=st.integers(1, 30),
)
def test_the_exhaustive_batches_break_ties_by_slot_across_the_cut(scores: list[float], first: int) -> None:
    slots = np.arange(len(scores), dtype=np.int64) * 3
    values = np.array(scores)
    batches = list(pruning.ranked_batches(slots, values, first))
    got = [int(s) for batch, _ in batches for s in batch]
    order = np.lexsort((slots, -values))
    assert got == slots[order].tolist()
    assert len(batches[0][0]) == min(first, len(scores))


@settings(max_examples=200, deadline=None)
@given(postings(), st.integers(0, 2**32 - 1))
def test_exact_scores_are_the_word_by_word_sums(
    case: tuple[list[pruning.Word], Any, Any, int, int], pick: int
) -> None:
    """The scores of a few slots, all words at once, equal the sums of each word's contribution
    looked up alone, added in the words' order, bit for bit (slots holding none of them score 0)."""
    words, norm, _, _, _ = case
    rng = np.random.default_rng(pick)
    slots = np.sort(rng.choice(len(norm), size=min(len(norm), 1 + pick % 40), replace=False))
    expected = np.zeros(len(slots))
    for word in words:
        expected += pruning._looked_up(word, slots, norm)
    assert pruning.exact_scores(words, slots, norm).tolist() == expected.tolist()


@settings(max_examples=200, deadline=None)
@given(postings(), st.integers(0, 2**32 - 1))
def test_a_search_scores_each_slot_once_and_the_same_in_any_batch(
    case: tuple[list[pruning.Word], Any, Any, int, int], pick: int
) -> None:
    """Batches of slots that overlap, in any order: a slot scored before is not scored again, and
    every score is what ``exact_scores`` gives that slot alone."""
    words, norm, keep, want, seed = case
    rng = np.random.default_rng(pick)
    search = pruning._Search(words, norm, keep, want, np.zeros(len(norm), dtype=np.float32), seed)
    scored = 0
    for _ in range(3):
        slots = rng.choice(len(norm), size=int(rng.integers(1, min(len(norm), 30) + 1)), replace=False)
        fresh = len(set(slots.tolist()) - set(search.scored.tolist()))
        got = search._exact(slots)
        scored += fresh
        assert len(search.scored) == scored
        for slot, score in zip(slots.tolist(), got.tolist(), strict=True):
            assert score == pruning.exact_scores(words, np.array([slot]), norm)[0]
