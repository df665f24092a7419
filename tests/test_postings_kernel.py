"""The compiled loops of the pruned lexical search (``retrieval/_postings.c``) do what numpy's steps
do, to the bit: the bounds a read adds to each slot, the slots a pass lists and counts. Bad arrays
(another type, another length, a slot past the end, read-only) raise a clear error instead of
writing out of bounds. Where no compiler built them, the tests skip (and CI, which builds them, fails
instead)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.retrieval import pruning

if pruning._postings is None:
    if os.environ.get("CI"):
        pytest.fail("the compiled loops (retrieval/_postings.c) were not built", pytrace=False)
    pytest.skip("the compiled loops (retrieval/_postings.c) were not built here", allow_module_level=True)

kernel = pruning._postings


def add_coded(partial: Any, docs: Any, codes: Any, unit: Any, threads: int = 1) -> None:
    """One word's coded postings added (``add_coded_lists`` with one list)."""
    kernel.add_coded_lists(partial, [docs], [codes], np.array([unit], dtype=np.float32), threads)


def random_postings(rng: Any, slots: int, share: float) -> Any:
    return np.flatnonzero(rng.random(slots) < share).astype(np.int32)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5_000), st.sampled_from([0.001, 0.1, 0.7, 1.0]), st.integers(0, 2**32 - 1))
def test_coded_bounds_add_as_numpy_adds_them(slots: int, share: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    start = rng.random(slots).astype(np.float32) * (rng.random() < 0.5)
    words = [(random_postings(rng, slots, share), float(rng.random() * 3)) for _ in range(3)]
    compiled, expected = start.copy(), start.copy()
    for docs, unit in words:
        codes = rng.integers(1, 256, len(docs)).astype(np.uint8)
        add_coded(compiled, docs, codes, unit)
        np.add.at(expected, docs.astype(np.intp), codes.astype(np.float32) * np.float32(unit))
    assert compiled.tobytes() == expected.tobytes()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5_000), st.integers(0, 6), st.sampled_from([1, 2]), st.integers(0, 2**32 - 1))
def test_lists_added_by_two_threads_sum_as_one_by_one(
    slots: int, lists: int, threads: int, seed: int
) -> None:
    """Each thread adds to one half of the slots, taking the words in order: every sum is the one
    the words give added one after another, to the bit."""
    rng = np.random.default_rng(seed)
    docs = [random_postings(rng, slots, float(rng.choice([0.001, 0.1, 0.7, 1.0]))) for _ in range(lists)]
    codes = [rng.integers(1, 256, len(d)).astype(np.uint8) for d in docs]
    units = (rng.random(lists) * 3).astype(np.float32)
    together, apart = np.zeros(slots, np.float32), np.zeros(slots, np.float32)
    kernel.add_coded_lists(together, docs, codes, units, threads)
    for d, c, unit in zip(docs, codes, units.tolist(), strict=True):
        add_coded(apart, d, c, unit)
    assert together.tobytes() == apart.tobytes()


def test_lists_out_of_order_or_range_are_refused() -> None:
    partial, codes = np.zeros(10, np.float32), [np.ones(3, np.uint8)]
    units = np.ones(1, np.float32)
    with pytest.raises(ValueError, match="list 0, posting 0: slot 8 is out of ascending order"):
        kernel.add_coded_lists(partial, [np.array([8, 1, 9], np.int32)], codes, units, 2)
    for docs in ([1, 10, 2], [1, -4, 2]):
        with pytest.raises(IndexError, match=r"list 0, posting 1: slot -?[0-9]+ is outside 0\.\.9"):
            kernel.add_coded_lists(partial, [np.array(docs, np.int32)], codes, units, 1)
    with pytest.raises(ValueError, match="2 units for 1 lists"):
        kernel.add_coded_lists(partial, [np.zeros(3, np.int32)], codes, np.ones(2, np.float32), 1)
    with pytest.raises(ValueError, match="list 0: docs and codes differ in length"):
        kernel.add_coded_lists(partial, [np.zeros(2, np.int32)], codes, units, 1)
    with pytest.raises(ValueError, match="sequences of as many arrays"):
        kernel.add_coded_lists(partial, [np.zeros(3, np.int32)], [], units, 1)
    with pytest.raises(TypeError, match="codes: expected 1-byte items"):
        kernel.add_coded_lists(partial, [np.zeros(3, np.int32)], [np.ones(3, np.int32)], units, 2)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5_000), st.sampled_from([0.001, 0.1, 0.7, 1.0]), st.integers(0, 2**32 - 1))
def test_scored_bounds_add_as_numpy_adds_them(slots: int, share: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    norm = rng.choice([0.3, 0.9, 1.4, 7.0], size=slots)
    compiled, expected = np.zeros(slots, np.float32), np.zeros(slots, np.float32)
    for _ in range(3):
        docs = random_postings(rng, slots, share)
        tf = rng.choice(np.array([1.0, 2.0, 1.5, 40.0], dtype=np.float32), size=len(docs))
        weight = float(rng.random() * 5)
        kernel.add_scored(compiled, docs, tf, norm, weight)
        bounds = pruning._contribution(weight, tf, norm[docs]).astype(np.float32)
        np.add.at(expected, docs.astype(np.intp), bounds)
    assert compiled.tobytes() == expected.tobytes()


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 3_000),
    st.sampled_from([0.0, 0.5, 0.99, 1.5]),
    st.sampled_from(["none", "full", "short", "long"]),
    st.integers(0, 2**32 - 1),
)
def test_a_pass_lists_and_counts_the_slots_numpy_finds(
    slots: int, floor: float, keep_kind: str, seed: int
) -> None:
    """Slots whose bound reaches the floor and that ``keep`` keeps; a ``keep`` shorter than the
    slots (an index's capacity past its lessons) keeps none past its end."""
    rng = np.random.default_rng(seed)
    partial = (rng.random(slots) * (rng.random(slots) < 0.6)).astype(np.float32)
    partial[rng.random(slots) < 0.05] = np.float32(floor)  # ties with the floor reach it
    sizes = {"none": 0, "full": slots, "short": slots // 2, "long": slots + 7}
    keep = None if keep_kind == "none" else rng.random(sizes[keep_kind]) < 0.8
    reaching = partial >= np.float32(floor)
    if keep is not None:
        kept = np.zeros(slots, dtype=bool)
        kept[: min(slots, len(keep))] = keep[:slots]
        reaching &= kept
    expected = np.flatnonzero(reaching)
    for threads in (1, 2):
        out = np.full(slots + 3, -1, dtype=np.int32)
        found = kernel.reaching(partial, floor, keep, out, threads)
        assert out[:found].tolist() == expected.tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=6),
    st.lists(st.integers(-3, 1_100), max_size=40),
    st.integers(0, 2**32 - 1),
)
def test_lower_bounds_are_numpys_searchsorted_in_each_list(
    sizes: list[int], slots: list[int], seed: int
) -> None:
    """Lists cut from one pool (ascending each, with gaps between them), slots in any order, past
    either end or held: each answer is numpy's, moved to where its list starts."""
    rng = np.random.default_rng(seed)
    lists = [np.sort(rng.choice(1_000, size=size, replace=False)).astype(np.int32) for size in sizes]
    parts, starts, end = [], [], 0
    for part in lists:
        gap = rng.integers(0, 5, size=int(rng.integers(0, 3))).astype(np.int32)
        parts += [gap, part]
        starts.append(end + len(gap))
        end += len(gap) + len(part)
    pool = np.concatenate(parts)
    needles = np.array(slots, dtype=np.int32)
    out = np.full(len(lists) * len(needles), -1, dtype=np.int64)
    kernel.lower_bounds(pool, np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int64), needles, out)
    expected = [start + np.searchsorted(part, needles) for start, part in zip(starts, lists, strict=True)]
    assert out.tolist() == (np.concatenate(expected).tolist() if expected else [])


def test_lower_bounds_refuse_a_list_outside_the_pool() -> None:
    pool, slots = np.arange(10, dtype=np.int32), np.array([3], np.int32)
    out = np.zeros(1, np.int64)
    for start, size in ((8, 3), (-1, 2), (0, -1)):
        with pytest.raises(IndexError, match="outside the pool's 10"):
            kernel.lower_bounds(pool, np.array([start], np.int64), np.array([size], np.int64), slots, out)
    with pytest.raises(ValueError, match="need 2 outputs, got 1"):
        kernel.lower_bounds(pool, np.array([0, 5], np.int64), np.array([5, 5], np.int64), slots, out)
    with pytest.raises(TypeError, match="starts: expected 8-byte items"):
        kernel.lower_bounds(pool, np.array([0], np.int32), np.array([5], np.int64), slots, out)


def test_a_slot_past_the_array_is_an_index_error_not_a_write() -> None:
    """The loop stops at the bad posting: the ones before it were added, none after."""
    codes = np.ones(3, np.uint8)
    for docs in (np.array([1, 8, 2], np.int32), np.array([1, -1, 2], np.int32)):
        partial = np.zeros(8, np.float32)
        with pytest.raises(IndexError, match="posting 1: slot"):
            add_coded(partial, docs, codes, 1.0)
        with pytest.raises(IndexError, match="posting 1: slot"):
            kernel.add_scored(partial, docs, np.ones(3, np.float32), np.ones(8), 1.0)
        assert np.flatnonzero(partial).tolist() == [1]
    # A norm shorter than the slots bounds them too (it is read at every slot).
    with pytest.raises(IndexError):
        kernel.add_scored(partial, np.array([5], np.int32), np.ones(1, np.float32), np.ones(4), 1.0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda p: add_coded(p.astype(np.float64), np.zeros(1, np.int32), np.ones(1, np.uint8), 1.0),
         TypeError, "partial: expected 4-byte items"),
        (lambda p: add_coded(p, np.zeros(1, np.int64), np.ones(1, np.uint8), 1.0),
         TypeError, "docs: expected 4-byte items"),
        (lambda p: add_coded(p, np.zeros(1, np.float32), np.ones(1, np.uint8), 1.0),
         TypeError, "docs: expected 4-byte items of type 'il', got 'f'"),
        (lambda p: add_coded(p, np.zeros(2, np.int32), np.ones(1, np.uint8), 1.0),
         ValueError, "docs and codes differ in length"),
        (lambda p: kernel.add_scored(p, np.zeros(2, np.int32), np.ones(3, np.float32), np.ones(4), 1.0),
         ValueError, "docs and tf differ in length"),
        (lambda p: kernel.add_scored(p, np.zeros(1, np.int32), np.ones(1, np.float32), np.ones(4, np.float32), 1.0),
         TypeError, "norm: expected 8-byte items"),
        (lambda p: add_coded(p, np.zeros(1, ">i4"), np.ones(1, np.uint8), 1.0),
         TypeError, "docs: expected 4-byte items of type 'il', got '>i'"),
        (lambda p: kernel.reaching(p, 0.5, None, np.zeros(2, np.int32)), ValueError, "out holds 2 slots of 4"),
        (lambda p: kernel.reaching(p, 0.5, np.ones(4, np.int32), np.zeros(4, np.int32)),
         TypeError, "keep: expected 1-byte items"),
        (lambda p: add_coded(p, "not an array", np.ones(1, np.uint8), 1.0), TypeError, "bytes-like"),
        (lambda p: add_coded(p, np.zeros(1, np.int32), np.ones(1, np.uint8), 1.0, "x"), TypeError, "integer"),
    ],
)  # fmt: skip
def test_bad_arrays_are_clear_errors(call: Any, error: type[Exception], message: str) -> None:
    partial = np.zeros(4, np.float32)
    with pytest.raises(error, match=message):
        call(partial)
    assert not partial.any()


def test_read_only_or_strided_arrays_are_refused() -> None:
    partial = np.zeros(4, np.float32)
    partial.flags.writeable = False
    with pytest.raises((BufferError, ValueError)):
        add_coded(partial, np.zeros(1, np.int32), np.ones(1, np.uint8), 1.0)
    strided = np.zeros(8, np.int32)[::2]
    with pytest.raises((BufferError, ValueError)):
        add_coded(np.zeros(4, np.float32), strided, np.ones(4, np.uint8), 1.0)


def test_empty_arrays_do_nothing() -> None:
    partial = np.zeros(0, np.float32)
    add_coded(partial, np.zeros(0, np.int32), np.zeros(0, np.uint8), 1.0)
    kernel.add_coded_lists(partial, [], [], np.zeros(0, np.float32), 2)
    kernel.add_scored(partial, np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0), 1.0)
    assert kernel.reaching(partial, 0.0, None, np.zeros(0, np.int32)) == 0
    kernel.lower_bounds(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(3, np.int32),
                        np.zeros(0, np.int64))  # fmt: skip
