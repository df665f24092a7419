"""The vector index's first step (sign-bit distances, a slice of rows at a time) counts what the
whole-column count does, across slice edges and for every number of words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.retrieval import vector


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(1, 300),
    words=st.integers(1, 7),
    spare=st.integers(0, 20),
    slice_rows=st.sampled_from([1, 7, 64, 1 << 16]),
    seed=st.integers(0, 2**32 - 1),
)
def test_hamming_counts_the_bits_that_differ(
    rows: int, words: int, spare: int, slice_rows: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**64, size=(words, rows + spare), dtype=np.uint64)  # columns past size: unread
    query = rng.integers(0, 2**64, size=words, dtype=np.uint64)
    expected = sum(np.bitwise_count(bits[w, :rows] ^ query[w]).astype(np.uint16) for w in range(words))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vector, "HAMMING_SLICE", slice_rows)
        got = vector.hamming(bits, query, rows)
    assert got.dtype == np.uint16
    assert got.tolist() == np.asarray(expected).tolist()


@settings(max_examples=200, deadline=None)
@given(
    distances=st.lists(st.integers(0, 40), min_size=1, max_size=400),
    share=st.floats(0.0, 1.0),
)
def test_nearest_rows_are_the_least_distances(distances: list[int], share: float) -> None:
    """As many rows as asked, each once, and none farther than a row left out (ties by row)."""
    distance = np.array(distances, dtype=np.uint16)
    count = max(1, int(share * len(distance)))
    rows = vector.nearest_rows(distance, count)
    assert len(rows) == count == len(set(rows.tolist()))
    left_out = np.setdiff1d(np.arange(len(distance)), rows)
    if len(left_out):
        assert distance[rows].max() <= distance[left_out].min()
    assert sorted(distance[rows].tolist()) == sorted(distances)[:count]
