"""An import's worker makes a lesson's BM25 factor text but for the mean length (PostgreSQL's JSON,
Redis's grouped field); the importing process fills it in. Filled in, it is the text made from every
term's frequency in one go, for every shape of term and frequency."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.stores.lexical import bm25_factors
from lessonbank.stores.redis.index import Grouped, factors_field
from lessonbank.stores.sql.postgres_import import Factors
from lessonbank.stores.sql.postgres_search import factors_json

_TERMS = st.text(alphabet="abz019", min_size=1, max_size=6) | st.text(
    alphabet=["a", "\u00e9", "%", '"', "\\", "{", "}", ":", "'", " ", "1"], min_size=1, max_size=4
)
_TFS = st.sampled_from([1.0, 2.0, 0.75, 1.75, 3.0, 12.5]) | st.floats(min_value=-1.0, max_value=50.0)
_MEANS = st.sampled_from([0.0, 1.0, 57.3, 180.5]) | st.floats(min_value=0.0, max_value=1e6)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_TERMS, _TFS, max_size=12), st.integers(min_value=0, max_value=5000), _MEANS)
def test_filled_in_factors_are_those_of_every_term(
    frequencies: dict[str, float], length: int, mean: float
) -> None:
    factors = bm25_factors(frequencies, length, mean)
    assert Factors.of(frequencies).json(length, mean) == factors_json(factors)
    field = Grouped.of(frequencies).field(length, mean)
    if field is not None:
        assert field == factors_field(frequencies, length, mean)
    else:  # two frequencies took the same factor: the caller asks factors_field
        assert len(set(factors.values())) < len({tf for tf in frequencies.values() if tf > 0})


def test_many_distinct_frequencies_are_filled_in_too() -> None:
    frequencies = {f"w{n}": 1.0 + n / 4 for n in range(300)} | {"again": 1.0, "gone": 0.0}
    assert Factors.of(frequencies).json(900, 180.5) == factors_json(bm25_factors(frequencies, 900, 180.5))


def test_a_factor_two_frequencies_share_is_left_to_factors_field() -> None:
    grouped = Grouped((1.0, 1.0), ("a", "b"))  # as if two frequencies rounded to one factor
    assert grouped.field(10, 10.0) is None
