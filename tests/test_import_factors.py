"""A lesson's BM25 factor text worked out once per distinct term frequency is the text made from
every term's factor, for every shape of term and frequency: PostgreSQL's JSON, made by an import's
worker but for the mean length and filled in by the importing process, and Redis's field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.stores import lexical
from lessonbank.stores.lexical import FactorTexts, bm25_factors
from lessonbank.stores.redis import index
from lessonbank.stores.redis.db import key_part
from lessonbank.stores.redis.index import FactorsField, factors_field
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
    assert factors_field(frequencies, length, mean) == _field_term_by_term(frequencies, length, mean)
    made_apart = FactorsField.of(frequencies).field(length, mean)  # by an import's worker, then filled in
    assert made_apart is None or made_apart == factors_field(frequencies, length, mean)


def _field_term_by_term(frequencies: dict[str, float], length: int, mean: float) -> str:
    """Redis's field as grouping every term's factor gives it."""
    groups: dict[float, list[str]] = {}
    for term, factor in bm25_factors(frequencies, length, mean).items():
        groups.setdefault(factor, []).append(term)
    plain = "".join(frequencies)
    if not (plain.isascii() and plain.isalnum()):
        groups = {factor: [key_part(term) for term in words] for factor, words in groups.items()}
    return "".join(f"{factor!r}={' '.join(words)};" for factor, words in groups.items())


def test_many_distinct_frequencies_are_filled_in_too() -> None:
    frequencies = {f"w{n}": 1.0 + n / 4 for n in range(300)} | {"again": 1.0, "gone": 0.0}
    assert Factors.of(frequencies).json(900, 180.5) == factors_json(bm25_factors(frequencies, 900, 180.5))


def test_two_frequencies_of_one_factor_are_one_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def one_factor(frequencies: dict[str, float], length: int, mean: float) -> dict[str, float]:
        return dict.fromkeys(frequencies, 0.5)

    monkeypatch.setattr(index, "bm25_factors", one_factor)
    monkeypatch.setattr(lexical, "bm25_factors", one_factor)  # FactorTexts' (the grouped path)
    assert factors_field({"a": 1.0, "b": 2.0, "c": 1.0}, 10, 10.0) == "0.5=a b c;"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_TERMS, _TFS, max_size=8), max_size=5), _MEANS)
def test_factor_texts_shared_by_a_chunk_give_each_lesson_its_own(
    lessons: list[dict[str, float]], mean: float
) -> None:
    texts = FactorTexts(120, mean)  # one chunk's, at one length: each factor worked out once
    for frequencies in lessons:
        expected = factors_json(bm25_factors(frequencies, 120, mean))
        assert Factors.of(frequencies).json(120, mean, texts) == expected
