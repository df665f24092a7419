"""A large pruned search adds its words' bounds on both cores, each thread into its own half of the
slots: the sums are the one thread's to the bit, so the ranking is the exhaustive scorer's; the
search goes on only once both halves are done, whatever either raised; small searches stay on one
thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessonbank.retrieval import both_halves, pruning
from lessonbank.retrieval.membership import Membership
from tests.test_pruning import exhaustive, postings


@pytest.fixture
def split_always(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read split, however small; the names of the threads that took a half."""
    monkeypatch.setattr(both_halves, "SPLIT_FROM", 0)
    monkeypatch.setattr(both_halves, "SPLIT_SLOTS", 0)
    monkeypatch.setattr(pruning, "SEED_POSTINGS", 16)  # small cases pass every phase of the search
    threads: list[str] = []
    real = both_halves.run_halved

    def recorded(task: Any, slots: int) -> None:
        def named(first: int, end: int) -> None:
            threads.append(threading.current_thread().name)
            task(first, end)

        real(named, slots)

    monkeypatch.setattr(both_halves, "run_halved", recorded)
    mapped = both_halves.map_halved

    def recorded_map(function: Any, items: Any) -> Any:
        def named(part: Any) -> Any:
            threads.append(threading.current_thread().name)
            return function(part)

        return mapped(named, items)

    monkeypatch.setattr(both_halves, "map_halved", recorded_map)
    return threads


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(postings())
def test_a_split_search_is_the_head_of_the_exhaustive_ranking(
    split_always: list[str], case: tuple[list[pruning.Word], Any, Any, int, int]
) -> None:
    words, norm, keep, want, seed = case
    split_always.clear()
    slots, scores = pruning.top_slots(words, norm, keep, want, seed=seed)
    expected_slots, expected_scores = exhaustive(words, norm, keep, want)
    assert slots.tolist() == expected_slots.tolist()
    assert scores.tolist() == expected_scores.tolist()  # bit for bit
    if any(len(w.docs) or len(w.extra_docs) for w in words):
        assert any(name.startswith("lessonbank-halves") for name in split_always)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(postings())
def test_split_reads_leave_the_sums_of_one_thread_to_the_bit(
    split_always: list[str], case: tuple[list[pruning.Word], Any, Any, int, int]
) -> None:
    words, norm, keep, want, _ = case
    sums = []
    for split in (False, True):
        both_halves.SPLIT_FROM = 0 if split else 1 << 62
        partial = np.zeros(len(norm), dtype=np.float32)
        search = pruning._Search(words, norm, keep, want, partial, 16)
        search._read(words)
        sums.append(partial)
    assert sums[0].tobytes() == sums[1].tobytes()


def test_small_searches_stay_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(task: Any, slots: int) -> None:
        raise AssertionError("split")

    monkeypatch.setattr(both_halves, "run_halved", refused)
    docs = np.arange(0, 1_000, 2, dtype=np.int32)
    word = pruning.Word(docs, np.ones(len(docs), np.float32), docs[:0], np.zeros(0, np.float32), 1.0, 1.0)
    slots, _ = pruning.top_slots([word], np.ones(1_000), None, 3, seed=1)
    assert slots.tolist() == [0, 2, 4]


@pytest.mark.parametrize("failing", ["first", "second"])
def test_a_failing_half_is_raised_once_both_are_done(failing: str) -> None:
    """Nothing may write the search's array after the call returns, even when it raises."""
    finished: list[int] = []
    other_started = threading.Event()

    def task(first: int, end: int) -> None:
        if first == 0:
            assert other_started.wait(10)  # the second half runs while the first does
            if failing == "first":
                raise ValueError("first half")
        else:
            other_started.set()
            if failing == "second":
                raise ValueError("second half")
        finished.append(first)

    with pytest.raises(ValueError, match=f"{failing} half"):
        both_halves.run_halved(task, 100)
    assert finished == ([50] if failing == "first" else [0])


def test_concurrent_split_searches_each_rank_as_the_exhaustive_scorer(split_always: list[str]) -> None:
    """Searches of several indexes at once share the one pool thread; each uses its own array."""
    rng = np.random.default_rng(7)
    slots = 5_000
    norm = rng.choice([0.5, 1.0, 2.0], size=slots)
    cases = []
    for _ in range(6):
        words = []
        for share in (0.002, 0.01, 0.1, 0.5, 0.9):
            held = np.flatnonzero(rng.random(slots) < share).astype(np.int32)
            tf = rng.choice(np.array([1.0, 2.0, 3.0], dtype=np.float32), size=len(held))
            weight = float(rng.choice([0.3, 1.0, 4.0]))
            bound = weight * float((tf / (tf + norm[held])).max()) if len(held) else 0.0
            words.append(pruning.Word(held, tf, held[:0], tf[:0], weight, bound))
        cases.append(words)

    def search(words: list[pruning.Word]) -> tuple[list[int], list[float]]:
        found, scores = pruning.top_slots(words, norm, None, 10, pruning.Scratch(), seed=16)
        return found.tolist(), scores.tolist()

    with ThreadPoolExecutor(max_workers=3) as callers:
        answers = list(callers.map(search, cases * 4))
    for words, (found, scores) in zip(cases * 4, answers, strict=True):
        expected_slots, expected_scores = exhaustive(words, norm, None, 10)
        assert (found, scores) == (expected_slots.tolist(), expected_scores.tolist())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(postings(), st.integers(0, 2**32 - 1))
def test_split_lookups_and_exact_scores_are_the_values_of_one_thread(
    split_always: list[str], case: tuple[list[pruning.Word], Any, Any, int, int], pick: int
) -> None:
    """Many candidates looked up, or scored, half on each core: each value as one thread gives it
    (a long list's bits, not built yet, are built once before the threads share them)."""
    words, norm, keep, want, _ = case
    rng = np.random.default_rng(pick)
    slots = np.sort(rng.choice(len(norm), size=min(len(norm), 1 + pick % 80), replace=False)).astype(np.int32)
    for word in words:
        if len(word.docs) and pick % 2:
            word.member = Membership(word.docs, len(norm))
    search = pruning._Search(words, norm, keep, want, np.zeros(len(norm), dtype=np.float32), 16)
    split_always.clear()
    for word in words:
        looked = search._looked_up(word, slots)
        assert looked.tolist() == pruning._looked_up(word, slots, norm).tolist()
    assert search._exact(slots).tolist() == pruning.exact_scores(words, slots, norm).tolist()
    assert any(name.startswith("lessonbank-halves") for name in split_always)


def test_a_search_does_both_halves_itself_while_the_pool_thread_is_busy() -> None:
    """Searches of several indexes at once never queue behind one another's halves."""
    ran: list[tuple[str, int]] = []

    def task(first: int, end: int) -> None:
        ran.append((threading.current_thread().name, first))

    assert both_halves._free.acquire(timeout=10)  # as if another search's half were running
    try:
        both_halves.run_halved(task, 100)
        whole = both_halves.map_halved(lambda part: part * 2, np.arange(10))
    finally:
        both_halves._free.release()
    here = threading.current_thread().name
    assert ran == [(here, 0), (here, 50)]
    assert whole.tolist() == list(range(0, 20, 2))
    both_halves.run_halved(task, 100)  # free again: the second half on the pool thread
    by_half = {first: name for name, first in ran[2:]}
    assert by_half[0] == here and by_half[50].startswith("lessonbank-halves")
