"""The shortcuts a bulk import takes to write a lesson's words give what the general forms give:
PostgreSQL's COPY text for tags, terms and BM25 factors, and the stems and term hashes kept per word."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.models import Lesson
from lessonbank.stores import lexical
from lessonbank.stores.lexical import FIELD_WEIGHTS, term_hash, weighted_term_vector, weighted_terms
from lessonbank.stores.sql.postgres_search import _joined_quoted, _quoted, factors_json
from lessonbank.text import stem, words

_PIECES = st.text(alphabet=st.sampled_from(["a", "b", "1", '"', "'", "\\", ",", " ", "é", "{"]), max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=6))
def test_quoted_lists_are_each_element_quoted_and_joined(texts: list[str]) -> None:
    assert _joined_quoted(texts, ",", '"', '\\"') == ",".join(_quoted(t, '"', '\\"') for t in texts)
    assert _joined_quoted(texts, " ", "'", "''") == " ".join(_quoted(t, "'", "''") for t in texts)


_FACTORS = st.dictionaries(
    _PIECES | st.text(alphabet="abcxyz0123456789", min_size=1, max_size=8),
    st.sampled_from([0.5, 1.25, 1.0]) | st.floats(min_value=1e-9, max_value=1e9),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_FACTORS)
def test_factors_are_the_json_of_the_factors(factors: dict[str, float]) -> None:
    assert factors_json(factors) == json.dumps(factors)


_WORDS = ["running ", "runs ", "ran ", "Caf\u00e9 ", "x1 ", "\u0130i ", "a-b ", "RUN. "]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TEXT.filter(str.strip), st.lists(_TEXT, max_size=3), _TEXT)
def test_terms_and_vectors_with_words_kept_are_those_of_the_stemmer(
    content: str, tags: list[str], learned_from: str
) -> None:
    lesson = Lesson(content=content, tags=[t[:60] for t in tags], learned_from=learned_from or None)
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    expected: dict[str, float] = {}
    for text, weight in ((lesson.content, 1.0), (" ".join(lesson.tags), 1.0), (lesson.learned_from, 0.75)):
        for word in words(text or ""):
            expected[stem(word)] = expected.get(stem(word), 0.0) + weight
    assert frequencies == expected
    assert list(frequencies) == list(expected)
    vector = weighted_term_vector(frequencies, length, lesson)
    assert {term_hash(term) for term in expected} <= {
        int.from_bytes(vector[i : i + 8], "little") for i in range(0, len(vector), 16)
    }
    assert vector == lexical.lesson_term_vector(lesson)


def test_words_past_the_cache_limit_are_still_stemmed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "_STEMS", {})
    monkeypatch.setattr(lexical, "_TERM_HASHES", {})
    monkeypatch.setattr(lexical, "_CACHE_MAX", 0)
    lesson = Lesson(content="running runs quickly", tags=["deploys"])
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    assert frequencies == {"run": 2.0, "quickli": 1.0, "deploi": 1.0} and length == 4
    assert weighted_term_vector(frequencies, length, lesson) == lexical.lesson_term_vector(lesson)
    assert lexical._STEMS == {} and lexical._TERM_HASHES == {}


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        _PIECES | st.text(alphabet="abc:%\u00e9", max_size=4), st.sampled_from([1.0, 2.0, 0.75, 3.5])
    ),
    st.integers(min_value=1, max_value=400),
)
def test_redis_factors_are_each_key_part_and_factor(frequencies: dict[str, float], length: int) -> None:
    from lessonbank.stores.lexical import bm25_factors
    from lessonbank.stores.redis.db import key_part
    from lessonbank.stores.redis.index import factors_field

    groups: dict[float, list[str]] = {}
    for term, factor in bm25_factors(frequencies, length, 37.5).items():
        groups.setdefault(factor, []).append(key_part(term))
    expected = "".join(f"{w!r}={' '.join(terms)};" for w, terms in groups.items())
    assert factors_field(frequencies, length, 37.5) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES | st.text(alphabet="ab\x1f\x7f\u2028\U0001f600", max_size=3), max_size=5))
def test_sqlite_tags_are_the_json_of_the_tags(tags: list[str]) -> None:
    from lessonbank.stores.sql.sqlite import _json_tags

    assert _json_tags(tags) == json.dumps(tags)
